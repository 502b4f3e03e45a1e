"""Webhook events: turning state changes, log lines and alerts into deliveries (the outbox).

Contracts:

- **Events become rows in the event's own transaction**: an experiment state change queued by
  :mod:`stalwart.master.transitions` adds its deliveries just before that transaction commits
  (the hook :func:`install_webhook_outbox` installs), and :func:`scan_logs` (called by
  :func:`stalwart.master.services.logs.add_logs`) adds those of matching log lines to the log
  batch's transaction; :func:`post_custom_event` (a trial's ``core_context.alert()``) to its
  request's. A rolled-back event delivers nothing; a committed one is delivered even if the
  master dies right after (:mod:`stalwart.master.cluster.webhooks` posts them).
- **Which webhooks fire** (Determined's rules): none when the experiment's config sets
  ``integrations.webhooks.exclude``; a workspace's webhook only for experiments and tasks of
  that workspace; a ``SPECIFIC`` webhook only for experiments whose config names it
  (``integrations.webhooks.webhook_id`` or ``webhook_name``); a task-log trigger once per
  task (its first matching line).
- **Triggers are cached** per database, regexes compiled once (:class:`TriggerCache`): a
  change made through :mod:`stalwart.master.services.webhooks` (which calls
  :func:`mark_changed`) is seen at once by this process, by others within :data:`CACHE_TTL`
  seconds. With no webhooks, scanning a batch costs one dictionary look-up.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, event, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from stalwart.errors import ForbiddenError, NotFoundError
from stalwart.master import policy
from stalwart.master.db.tables import (
    Allocation,
    Experiment,
    Project,
    Task,
    Trial,
    User,
    Webhook,
    WebhookDelivery,
    WebhookLogMatch,
    WebhookTrigger,
    Workspace,
    utcnow,
)
from stalwart.master.services import webhook_payloads as payloads
from stalwart.master.transitions import StateChanged

if TYPE_CHECKING:
    from stalwart.master.services.logs import NewLog

__all__ = [
    "CACHE",
    "CACHE_TTL",
    "TriggerCache",
    "install_webhook_outbox",
    "mark_changed",
    "post_custom_event",
    "scan_logs",
]

CACHE_TTL = 5.0
"""Seconds before a process re-reads triggers changed by another process."""

_DELIVERIES_KEY = "webhook_deliveries"
"""``session.info`` key: the transaction added deliveries (wake the deliverer after commit)."""
_SETTLED_KEY = "webhook_settled"
"""``session.info`` key: (task, trigger) pairs decided in this transaction."""
_CHANGED_KEY = "webhooks_changed"
"""``session.info`` key: webhooks changed in this transaction (drop the cache after commit)."""


def mark_changed(session: Session) -> None:
    """Webhooks or triggers changed in this transaction: the trigger cache is dropped after
    it commits."""
    session.info[_CHANGED_KEY] = True


# --- the trigger cache ---


@dataclass(frozen=True)
class _Trigger:
    """A trigger with what matching needs of its webhook."""

    id: int
    trigger_type: str
    state: str | None
    regex_text: str | None
    regex: re.Pattern[str] | None
    webhook_id: int
    webhook_name: str
    webhook_type: str
    mode: str
    workspace_id: int | None
    url: str


@dataclass
class _Entry:
    loaded_at: float
    state: list[_Trigger]
    log: list[_Trigger]
    settled: set[tuple[str, int]] = field(default_factory=set)
    """(task, trigger) pairs already decided (fired, or out of the webhook's scope)."""


class TriggerCache:
    """Triggers per database engine, regexes compiled once; see the module contract."""

    MAX_SETTLED = 100_000

    def __init__(self, ttl: float = CACHE_TTL) -> None:
        self.ttl = ttl
        self._entries: weakref.WeakKeyDictionary[Engine, _Entry] = weakref.WeakKeyDictionary()
        self._base_urls: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def configure(self, engine: Engine, *, base_url: str) -> None:
        """The web UI address that ``engine``'s Slack messages link to."""
        self._base_urls[engine] = base_url

    def base_url(self, session: Session) -> str:
        """The web UI address of ``session``'s master ("" when unset)."""
        engine = session.get_bind()
        return self._base_urls.get(engine, "") if isinstance(engine, Engine) else ""

    def get(self, session: Session) -> _Entry:
        """The triggers of ``session``'s database (loaded through it when stale)."""
        engine = session.get_bind()
        assert isinstance(engine, Engine)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(engine)
        if entry is not None and now - entry.loaded_at < self.ttl:
            return entry
        fresh = self._load(session, now)  # decided pairs start over: a task may have moved
        with self._lock:
            self._entries[engine] = fresh
        return fresh

    def invalidate(self, engine: Engine) -> None:
        """Forget ``engine``'s triggers (webhooks changed)."""
        with self._lock:
            self._entries.pop(engine, None)

    def settle(self, engine: Engine, pairs: set[tuple[str, int]]) -> None:
        """Remember decided (task, trigger) pairs (after their transaction committed)."""
        with self._lock:
            entry = self._entries.get(engine)
            if entry is not None and len(entry.settled) < self.MAX_SETTLED:
                entry.settled |= pairs

    @staticmethod
    def _load(session: Session, now: float) -> _Entry:
        rows = session.execute(
            select(WebhookTrigger, Webhook)
            .join(Webhook, Webhook.id == WebhookTrigger.webhook_id)
            .order_by(WebhookTrigger.id)
        ).all()
        state: list[_Trigger] = []
        log: list[_Trigger] = []
        for trigger, webhook in rows:
            condition = dict(trigger.condition or {})
            regex_text = condition.get("regex") if trigger.trigger_type == "TASK_LOG" else None
            try:
                compiled = re.compile(regex_text) if isinstance(regex_text, str) else None
            except re.error:
                continue  # stored before validation got stricter: never fires
            item = _Trigger(
                id=trigger.id,
                trigger_type=trigger.trigger_type,
                state=condition.get("state"),
                regex_text=regex_text if isinstance(regex_text, str) else None,
                regex=compiled,
                webhook_id=webhook.id,
                webhook_name=webhook.name,
                webhook_type=webhook.webhook_type,
                mode=webhook.mode,
                workspace_id=webhook.workspace_id,
                url=webhook.url,
            )
            if trigger.trigger_type == "TASK_LOG" and compiled is not None:
                log.append(item)
            elif trigger.trigger_type == "EXPERIMENT_STATE_CHANGE":
                state.append(item)
        return _Entry(loaded_at=now, state=state, log=log)


CACHE = TriggerCache()
"""The master's trigger cache."""


# --- matching ---


@dataclass(frozen=True)
class _Scope:
    """What matching needs to know about the experiment or task of an event."""

    workspace_id: int | None
    experiment_id: int | None
    exclude: bool = False
    ids: frozenset[int] = frozenset()
    names: frozenset[str] = frozenset()


def _matches(trigger: _Trigger, scope: _Scope) -> bool:
    if scope.exclude:
        return False
    if trigger.workspace_id is not None and trigger.workspace_id != scope.workspace_id:
        return False
    if trigger.mode == "SPECIFIC":
        return scope.experiment_id is not None and (
            trigger.webhook_id in scope.ids or trigger.webhook_name in scope.names
        )
    return True


def _experiment_scope(session: Session, experiment: Experiment) -> _Scope:
    project = session.get(Project, experiment.project_id)
    hooks = ((experiment.config or {}).get("integrations") or {}).get("webhooks") or {}
    return _Scope(
        workspace_id=project.workspace_id if project is not None else None,
        experiment_id=experiment.id,
        exclude=bool(hooks.get("exclude")),
        ids=frozenset(int(i) for i in hooks.get("webhook_id") or ()),
        names=frozenset(str(n) for n in hooks.get("webhook_name") or ()),
    )


def _experiment_facts(session: Session, experiment: Experiment) -> payloads.ExperimentFacts:
    project = session.get(Project, experiment.project_id)
    workspace = session.get(Workspace, project.workspace_id) if project is not None else None
    config = experiment.config or {}
    resources = config.get("resources") or {}
    return payloads.ExperimentFacts(
        id=experiment.id,
        state=experiment.state,
        name=str(config.get("name") or experiment.name),
        start_time=experiment.start_time,
        end_time=experiment.end_time,
        resource_pool=experiment.resource_pool,
        slots_per_trial=int(resources.get("slots_per_trial") or 0),
        workspace=workspace.name if workspace is not None else "",
        project=project.name if project is not None else "",
        workspace_id=workspace.id if workspace is not None else None,
        project_id=project.id if project is not None else None,
    )


def _add_delivery(
    session: Session, trigger: _Trigger, event_type: str, body: dict[str, Any]
) -> None:
    session.add(
        WebhookDelivery(
            webhook_id=trigger.webhook_id,
            event_type=event_type,
            url=trigger.url,
            payload=payloads.dumps(body),
            state="PENDING",
            attempts=0,
            next_attempt_at=utcnow(),
        )
    )
    session.info[_DELIVERIES_KEY] = True


# --- experiment state changes ---


def _enqueue_state_changes(session: Session) -> None:
    changes = [
        c
        for c in session.info.get("state_changes", ())
        if isinstance(c, StateChanged) and c.kind == "experiment"
    ]
    if not changes:
        return
    triggers = CACHE.get(session).state
    if not triggers:
        return
    now = utcnow()
    base_url = CACHE.base_url(session)
    for change in changes:
        wanted = [t for t in triggers if t.state == change.new]
        if not wanted:
            continue
        experiment = session.get(Experiment, int(change.id))
        if experiment is None:
            continue
        scope = _experiment_scope(session, experiment)
        facts = _experiment_facts(session, experiment)
        facts = payloads.ExperimentFacts(**{**facts.__dict__, "state": change.new})
        for trigger in wanted:
            if _matches(trigger, scope):
                body = payloads.experiment_body(
                    trigger.webhook_type, facts, now=now, base_url=base_url
                )
                _add_delivery(session, trigger, "EXPERIMENT_STATE_CHANGE", body)


def install_webhook_outbox(
    session_factory: sessionmaker[Session], wake: threading.Event, *, base_url: str = ""
) -> None:
    """On sessions made by ``session_factory``: add the deliveries of queued experiment state
    changes before each commit; after it, wake the deliverer (``wake``), drop the trigger
    cache when webhooks changed, and remember the decided task-log triggers. Installed once by
    the master's ``open_state``. ``base_url``: the web UI's address, for Slack links."""
    engine = session_factory.kw.get("bind")
    if isinstance(engine, Engine):
        CACHE.configure(engine, base_url=base_url)

    @event.listens_for(session_factory, "before_commit")
    def _outbox(session: Session) -> None:
        _enqueue_state_changes(session)

    @event.listens_for(session_factory, "after_commit")
    def _after(session: Session) -> None:
        engine = session.get_bind()
        settled = session.info.pop(_SETTLED_KEY, None)
        if session.info.pop(_CHANGED_KEY, False) and isinstance(engine, Engine):
            CACHE.invalidate(engine)
        elif settled and isinstance(engine, Engine):
            CACHE.settle(engine, settled)
        if session.info.pop(_DELIVERIES_KEY, False):
            wake.set()

    @event.listens_for(session_factory, "after_rollback")
    def _forget(session: Session) -> None:
        for key in (_DELIVERIES_KEY, _SETTLED_KEY, _CHANGED_KEY):
            session.info.pop(key, None)


# --- task logs ---


def _task_scope(session: Session, task_id: str) -> tuple[_Scope, payloads.TaskLogFacts] | None:
    task = session.get(Task, task_id)
    if task is None:
        return None
    experiment = (
        session.get(Experiment, task.experiment_id) if task.experiment_id is not None else None
    )
    if experiment is not None:
        scope = _experiment_scope(session, experiment)
    else:
        scope = _Scope(workspace_id=task.workspace_id, experiment_id=None)
    trial = session.get(Trial, task.trial_id) if task.trial_id is not None else None
    facts = payloads.TaskLogFacts(
        task_id=task_id,
        node_name="",
        triggering_log="",
        task_type=task.task_type,
        experiment_id=task.experiment_id,
        trial_id=trial.id if trial is not None else None,
    )
    return scope, facts


def _claim(session: Session, task_id: str, trigger_id: int) -> bool:
    """Record that ``trigger_id`` fired for ``task_id``; False if it already had."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = (
        insert(WebhookLogMatch)
        .values(task_id=task_id, trigger_id=trigger_id)
        .on_conflict_do_nothing()
        .returning(WebhookLogMatch.task_id)
    )
    return session.execute(statement).first() is not None  # None: the row was there


def scan_logs(session: Session, logs: Sequence[NewLog]) -> None:
    """Add the deliveries of task-log triggers that ``logs`` (being stored in this
    transaction) fire: per task and trigger, the first matching line (see the contract)."""
    entry = CACHE.get(session)
    triggers = entry.log
    if not triggers:
        return
    settled = entry.settled
    hits: dict[tuple[str, int], NewLog] = {}
    for line in logs:
        text = line.log
        for trigger in triggers:
            key = (line.task_id, trigger.id)
            if key in hits or key in settled:
                continue
            assert trigger.regex is not None
            if trigger.regex.search(text):
                hits[key] = line
    if not hits:
        return
    decided: set[tuple[str, int]] = session.info.setdefault(_SETTLED_KEY, set())
    by_id = {t.id: t for t in triggers}
    scopes: dict[str, tuple[_Scope, payloads.TaskLogFacts] | None] = {}
    now = utcnow()
    base_url = CACHE.base_url(session)
    for (task_id, trigger_id), line in hits.items():
        decided.add((task_id, trigger_id))
        if task_id not in scopes:
            scopes[task_id] = _task_scope(session, task_id)
        found = scopes[task_id]
        trigger = by_id[trigger_id]
        if found is None or not _matches(trigger, found[0]):
            continue
        if not _claim(session, task_id, trigger_id):
            continue
        facts = payloads.TaskLogFacts(
            **{**found[1].__dict__, "node_name": line.agent_id or "", "triggering_log": line.log}
        )
        assert trigger.regex_text is not None
        body = payloads.task_log_body(
            trigger.webhook_type, facts, trigger.regex_text, now=now, base_url=base_url
        )
        _add_delivery(session, trigger, "TASK_LOG", body)


# --- custom events (a trial's core_context.alert) ---


def post_custom_event(
    session: Session,
    user: User,
    *,
    allocation_id: str | None,
    experiment_id: int,
    trial_id: int | None,
    data: payloads.CustomData,
) -> int:
    """Add the deliveries of an alert about experiment ``experiment_id`` (Determined's
    ``PostWebhookEventData``); returns how many. A task may alert only about its own
    experiment, a user about experiments they may change. The alert goes to the ``CUSTOM``
    triggers of the webhooks the experiment's config names (``integrations.webhooks``, by id or
    name, global or of the experiment's workspace), unless it sets ``exclude``."""
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    if allocation_id is not None:
        allocation = session.get(Allocation, allocation_id)
        task = session.get(Task, allocation.task_id) if allocation is not None else None
        if task is None or task.experiment_id != experiment_id:
            raise ForbiddenError(
                f"the allocation token of {allocation_id} cannot alert about experiment "
                f"{experiment_id}: a task alerts only about its own experiment"
            )
    else:
        policy.require_change_experiment(session, user, experiment)
    scope = _experiment_scope(session, experiment)
    if scope.exclude or not (scope.ids or scope.names):
        return 0
    hooks = session.scalars(
        select(Webhook)
        .where(
            (Webhook.workspace_id.is_(None)) | (Webhook.workspace_id == scope.workspace_id),
            Webhook.id.in_(sorted(scope.ids)) | Webhook.name.in_(sorted(scope.names)),
        )
        .order_by(Webhook.id)
    ).all()
    facts = _experiment_facts(session, experiment)
    now, base_url, added = utcnow(), CACHE.base_url(session), 0
    for hook in hooks:
        customs = session.scalars(
            select(WebhookTrigger.id).where(
                WebhookTrigger.webhook_id == hook.id, WebhookTrigger.trigger_type == "CUSTOM"
            )
        ).all()
        for trigger_id in customs:
            trigger = _Trigger(
                id=trigger_id,
                trigger_type="CUSTOM",
                state=None,
                regex_text=None,
                regex=None,
                webhook_id=hook.id,
                webhook_name=hook.name,
                webhook_type=hook.webhook_type,
                mode=hook.mode,
                workspace_id=hook.workspace_id,
                url=hook.url,
            )
            body = payloads.custom_body(
                hook.webhook_type, facts, data, trial_id=trial_id, now=now, base_url=base_url
            )
            _add_delivery(session, trigger, "CUSTOM", body)
            added += 1
    session.commit()
    return added
