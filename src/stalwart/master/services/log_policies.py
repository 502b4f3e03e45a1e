"""Log policies (an experiment's ``log_policies``): matching a trial's log lines, and what a
match does, as Determined 0.38 does.

Contract:

- :func:`scan_logs` is called for every batch of task lines the master stores
  (:func:`stalwart.master.services.logs.add_logs`), in the batch's transaction. Lines of a
  trial's task that came from a node (``agent_id`` set) are searched for each policy's
  ``pattern`` (a Python regular expression, searched anywhere in the line, as Go's
  ``MatchString``); a line that prints the experiment config (``"log_policies":``) is skipped,
  as Determined skips it. An invalid pattern matches nothing (logged once).
- What a match records lives on the trial's task (``tasks.extra``, :data:`MATCHED`,
  :data:`DONT_RETRY`, :data:`EXCLUDED`); it survives master restarts:

  - a named policy labels the trial with its name (the last matching policy wins): the trial's
    ``logPolicyMatched`` in the API and on the UI's trial page. Determined's defaults label
    CUDA out-of-memory and uncorrectable ECC errors (``CUDA OOM``, ``ECC Error``);
  - ``cancel_retries``: the first line per pattern is kept; when the trial then fails it is not
    restarted (:func:`dont_retry`, read by :mod:`stalwart.master.cluster.lifecycle`);
  - ``exclude_node``: the node (agent) is kept, with the first line per pattern, and the trial's
    log gets Determined's line ``(log "..." matched regex ...) therefore will not schedule on
    <agent>``; the agent resource manager never places the trial there again
    (:func:`excluded_agents`). A restart still counts against ``max_restarts``.

- Policies are read once per experiment per process (they cannot change once it exists).
- ``det e continue`` forgets the ``cancel_retries`` and ``exclude_node`` matches of the trial it
  continues (:func:`forget_actions`; Determined runs it as a new task); the label stays.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from stalwart.master.db.tables import Experiment, Task, TaskLog, utcnow
from stalwart.master.services.experiment_config import typed_config

if TYPE_CHECKING:
    from stalwart.master.services.logs import NewLog

__all__ = [
    "DONT_RETRY",
    "EXCLUDED",
    "MATCHED",
    "Trigger",
    "dont_retry",
    "excluded_agents",
    "forget_actions",
    "label_of",
    "scan_logs",
]

log = logging.getLogger(__name__)

MATCHED = "log_policy_matched"
"""``tasks.extra`` key: the name of the last named policy a line matched."""
DONT_RETRY = "log_policy_dont_retry"
"""``tasks.extra`` key: ``{pattern: line}`` of matched ``cancel_retries`` policies."""
EXCLUDED = "log_policy_excluded_agents"
"""``tasks.extra`` key: ``{agent: {pattern: line}}`` of matched ``exclude_node`` policies."""

_CONFIG_LINE = re.compile(r'"log_policies":')
_CACHE_SIZE = 1024


@dataclass(frozen=True)
class _Policy:
    name: str | None
    pattern: str
    regex: re.Pattern[str] | None
    action: str | None


@dataclass(frozen=True)
class Trigger:
    """A ``cancel_retries`` policy that matched: its pattern and the first line it matched."""

    pattern: str
    line: str


_lock = threading.Lock()
_policies: dict[int, tuple[_Policy, ...]] = {}


def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error as exc:
        log.warning("log policy pattern %r is not a valid regular expression: %s", pattern, exc)
        return None


def _experiment_policies(session: Session, experiment_id: int) -> tuple[_Policy, ...]:
    with _lock:
        found = _policies.get(experiment_id)
    if found is not None:
        return found
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        return ()
    policies = tuple(
        _Policy(p.name, p.pattern, _compile(p.pattern), p.action)
        for p in typed_config(experiment).log_policies
        if p.pattern
    )
    with _lock:
        if len(_policies) >= _CACHE_SIZE:
            _policies.clear()
        _policies[experiment_id] = policies
    return policies


def scan_logs(session: Session, logs: Sequence[NewLog]) -> None:
    """Apply the log policies of the trials ``logs`` belong to (see the module contract)."""
    by_task: dict[str, list[NewLog]] = {}
    for line in logs:
        if line.agent_id and line.task_id:
            by_task.setdefault(line.task_id, []).append(line)
    for task_id, lines in by_task.items():
        task = session.get(Task, task_id)
        if task is None or task.trial_id is None or task.experiment_id is None:
            continue
        policies = _experiment_policies(session, task.experiment_id)
        if policies:
            _apply(session, task, policies, lines)


def _apply(
    session: Session, task: Task, policies: Sequence[_Policy], lines: Sequence[NewLog]
) -> None:
    extra: dict[str, Any] = dict(task.extra or {})
    before = json.dumps(extra, sort_keys=True)
    notes: list[tuple[str | None, str]] = []
    for line in lines:
        text = line.log
        if _CONFIG_LINE.search(text):
            continue
        for policy in policies:
            if policy.regex is None or not policy.regex.search(text):
                continue
            if policy.action == "cancel_retries":
                dont = dict(extra.get(DONT_RETRY) or {})
                dont.setdefault(policy.pattern, text.rstrip("\n"))
                extra[DONT_RETRY] = dont
            elif policy.action == "exclude_node" and line.agent_id:
                excluded = {k: dict(v) for k, v in (extra.get(EXCLUDED) or {}).items()}
                seen = excluded.setdefault(line.agent_id, {})
                if policy.pattern not in seen:
                    seen[policy.pattern] = text.rstrip("\n")
                    notes.append(
                        (
                            line.allocation_id,
                            f"(log {json.dumps(text.rstrip(chr(10)))} matched regex "
                            f"{policy.pattern}) therefore will not schedule on {line.agent_id}",
                        )
                    )
                extra[EXCLUDED] = excluded
            if policy.name is not None:
                extra[MATCHED] = policy.name
    if json.dumps(extra, sort_keys=True) != before:
        task.extra = extra
    for allocation_id, text in notes:
        session.add(
            TaskLog(
                task_id=task.task_id,
                allocation_id=allocation_id,
                timestamp=utcnow(),
                level="ERROR",
                stdtype="stderr",
                source="master",
                log=text + "\n",
            )
        )


def label_of(extra: Mapping[str, Any] | None) -> str | None:
    """The trial's ``logPolicyMatched`` from its task's ``extra``."""
    value = (extra or {}).get(MATCHED)
    return value if isinstance(value, str) else None


def dont_retry(task: Task | None) -> list[Trigger]:
    """The ``cancel_retries`` policies a line of ``task`` matched (empty: retry as usual)."""
    found = ((task.extra if task is not None else None) or {}).get(DONT_RETRY) or {}
    return [Trigger(str(pattern), str(line)) for pattern, line in sorted(found.items())]


def forget_actions(extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``extra`` without what the matches asked for (no retry, excluded agents), for a trial
    that is continued; its label stays."""
    if extra is None:
        return None
    return {k: v for k, v in extra.items() if k not in (DONT_RETRY, EXCLUDED)}


def excluded_agents(extra: Mapping[str, Any] | None) -> frozenset[str]:
    """The agents an ``exclude_node`` policy keeps the trial of a task's ``extra`` off."""
    return frozenset((extra or {}).get(EXCLUDED) or {})
