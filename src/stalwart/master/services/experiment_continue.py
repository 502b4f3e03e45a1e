"""Continuing a finished experiment (``det e continue``, ``POST /api/v1/experiments/continue``).

A single-trial experiment that has ended (COMPLETED, CANCELED or ERROR) trains on: the same trial
runs again, from its latest checkpoint, with the experiment's config merged with an override
(``--config searcher.max_length=20``, ``--config-file more.yaml``). Its metrics, checkpoints and
logs continue; the task gets ``DET_LATEST_CHECKPOINT`` and ``DET_STEPS_COMPLETED`` of that
checkpoint, so training resumes from its steps.

Contracts (Determined 0.38's ``ContinueExperiment``):

- The caller must be allowed to change the experiment (:func:`policy.require_change_experiment`).
- Only a **single**-searcher experiment is continued. A multi-trial search (random, grid, ASHA)
  is refused: Determined retries the failed trials of a random or grid search, which Stalwart
  does not do (yet).
- Only an experiment that has **ended** is continued; an active, paused or stopping one is
  refused ("wait for it to end, or kill it"). An archived one is refused.
- The override is merged over the experiment's config by the config-merge rules (what the
  override sets wins; ``searcher.max_length`` merges into the searcher) and the result is
  validated like a new experiment's. It may not set ``project`` or ``workspace`` (move the
  experiment instead), change the searcher away from ``single``, or change
  ``hyperparameters`` (the trial keeps the hyperparameters it was created with).
- The trial runs as the experiment's owner. Anyone else who continues it (an editor, an admin)
  may change only :data:`NON_OWNER_FIELDS`, the fields that name the experiment or bound the
  training it already does; the owner may change the rest too.
- What changes, in one transaction, through :mod:`stalwart.master.transitions`: the stored
  config (the original YAML is kept), the name, description, labels and resource pool columns;
  the trial back to ACTIVE with its restarts at 0 and its searcher marks cleared; the searcher
  told the trial runs again (:meth:`SingleSearch.continue_trial`); the experiment back to
  ACTIVE with progress 0 and its checkpoint GC to do again when it ends. The cluster loop then
  gives the trial a new allocation. Nothing is written when any check fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.config import validate_experiment
from stalwart.config.loader import parse_yaml
from stalwart.config.merge import merge_layers
from stalwart.errors import (
    ConfigError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
)
from stalwart.master import policy
from stalwart.master.cluster.lifecycle import master_log
from stalwart.master.db.tables import Checkpoint, Experiment, Task, Trial, User
from stalwart.master.searcher.factory import make_searcher
from stalwart.master.searcher.single import SingleSearch
from stalwart.master.services import log_policies
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.experiments import get_experiment
from stalwart.master.transitions import TRIAL_TERMINAL, set_experiment_state, set_trial_state

__all__ = [
    "CONTINUABLE_STATES",
    "NON_OWNER_FIELDS",
    "Continued",
    "continue_experiment",
    "continued_config",
]

CONTINUABLE_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR"})
"""States of an experiment that may be continued."""

NON_OWNER_FIELDS: tuple[tuple[str, ...], ...] = (
    ("name",),
    ("description",),
    ("labels",),
    ("max_restarts",),
    ("searcher", "max_length"),
    ("checkpoint_storage", "save_experiment_best"),
    ("checkpoint_storage", "save_trial_best"),
    ("checkpoint_storage", "save_trial_latest"),
)
"""The config fields someone other than the owner may change when continuing an experiment
(its trial runs as the owner, so what it runs and with what stays the owner's choice)."""

_PREFIX = "invalid experiment configuration: "


@dataclass
class Continued:
    """A continued experiment and what changed."""

    experiment: Experiment
    changed: list[str] = field(default_factory=list)
    """Top-level config fields the override changed."""


def _override(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        doc = parse_yaml(text, "<override config>")
    except ConfigError as exc:
        raise InvalidArgumentError(_PREFIX + "; ".join(exc.problems)) from None
    if doc.data is None:
        return {}
    if not isinstance(doc.data, dict):
        raise InvalidArgumentError(
            "the override config must be a mapping of experiment settings "
            "(e.g. --config searcher.max_length=20)"
        )
    return doc.data


def _comparable(
    config: Mapping[str, Any], leave_out: tuple[tuple[str, ...], ...]
) -> dict[str, str]:
    """Top-level fields as canonical JSON, without the ``leave_out`` paths."""
    data: dict[str, Any] = json.loads(json.dumps(config))
    for path in leave_out:
        parent: Any = data
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
    return {key: json.dumps(value, sort_keys=True) for key, value in data.items()}


def _changed(
    old: Mapping[str, Any], new: Mapping[str, Any], leave_out: tuple[tuple[str, ...], ...] = ()
) -> list[str]:
    a, b = _comparable(old, leave_out), _comparable(new, leave_out)
    return sorted(key for key in set(a) | set(b) if a.get(key) != b.get(key))


def continued_config(
    experiment: Experiment, override_text: str | None
) -> tuple[dict[str, Any], list[str]]:
    """The experiment's config with ``override_text`` merged over it, validated, and the
    top-level fields that changed (InvalidArgumentError for an override that may not be
    applied; see the module contract)."""
    active = typed_config(experiment).to_dict()
    searcher = str(active["searcher"]["name"])
    if searcher != "single":
        raise InvalidArgumentError(
            f"experiment {experiment.id} is a {searcher} search: only a single-trial experiment "
            "(searcher: single) can be continued",
            hint="create a new experiment (det e create) to search again",
        )
    override = _override(override_text)
    for key, verb in (("project", "project"), ("workspace", "workspace")):
        if override.get(key) is not None:
            raise InvalidArgumentError(
                f"'{key}' cannot be set in the override config: use `det experiment move` "
                f"first to change the experiment's {verb}"
            )
    try:
        loaded = validate_experiment(merge_layers(override, active), source="<override config>")
    except ConfigError as exc:
        raise InvalidArgumentError(_PREFIX + "; ".join(exc.problems)) from None
    merged = loaded.config.to_dict()
    name = merged["searcher"]["name"]
    if name != "single":
        raise InvalidArgumentError(
            f"the override config must keep the single searcher (got '{name}'): a continued "
            "experiment trains its one trial further"
        )
    changed = _changed(active, merged)
    if "hyperparameters" in changed:
        raise InvalidArgumentError(
            "the override config cannot change 'hyperparameters': the continued trial keeps the "
            "hyperparameters it was created with",
            hint="create a new experiment to train with other hyperparameters",
        )
    return merged, changed


def _trial_of(session: Session, experiment: Experiment) -> Trial | None:
    return session.scalars(
        select(Trial).where(Trial.experiment_id == experiment.id).order_by(Trial.id).limit(1)
    ).first()


def continue_experiment(
    session: Session, user: User, experiment_id: int, override_text: str | None
) -> Continued:
    """Continue experiment ``experiment_id`` (see the module contract); flushes, the caller
    commits and then wakes the cluster loop for it."""
    experiment = get_experiment(session, experiment_id)
    policy.require_change_experiment(session, user, experiment)
    if experiment.archived:
        raise FailedPreconditionError(f"experiment {experiment.id} is archived: unarchive it first")
    config, changed = continued_config(experiment, override_text)
    if experiment.state not in CONTINUABLE_STATES:
        raise FailedPreconditionError(
            f"experiment {experiment.id} is in state STATE_{experiment.state}: only a finished "
            "(COMPLETED, CANCELED or ERROR) experiment can be continued",
            hint="wait for it to end, or kill it first",
        )
    if user.id != experiment.owner_id:
        owner_only = _changed(typed_config(experiment).to_dict(), config, NON_OWNER_FIELDS)
        if owner_only:
            allowed = ", ".join(".".join(path) for path in NON_OWNER_FIELDS)
            owner = session.get(User, experiment.owner_id)
            raise ForbiddenError(
                f"experiment {experiment.id} runs as its owner "
                f"{owner.username if owner else experiment.owner_id}, so only they may change "
                f"{', '.join(owner_only)} when continuing it; anyone else may change only "
                f"{allowed}"
            )
    experiment.config = config
    experiment.name = str(config["name"])
    experiment.description = config.get("description")
    experiment.labels = list(config.get("labels") or [])
    experiment.resource_pool = str(config["resources"].get("resource_pool") or "default")
    experiment.progress = 0.0
    experiment.checkpoints_collected = False
    trial = _trial_of(session, experiment)
    if trial is None:
        experiment.searcher_state = None  # the searcher starts over and creates the trial
    else:
        _continue_trial(session, experiment, trial)
    set_experiment_state(session, experiment, "ACTIVE")
    session.flush()
    if trial is not None:
        what = f"with {', '.join(changed)} changed" if changed else "with its config unchanged"
        master_log(
            session,
            trial.task_id,
            None,
            f"experiment {experiment.id} continued by {user.username} {what}: trial {trial.id} "
            f"{_resumes_from(session, trial)}",
        )
    return Continued(experiment, changed)


def _resumes_from(session: Session, trial: Trial) -> str:
    latest = session.get(Checkpoint, trial.latest_checkpoint) if trial.latest_checkpoint else None
    if latest is None and trial.warm_start_checkpoint:
        return (
            f"starts from its warm-start checkpoint {trial.warm_start_checkpoint}: it has no "
            "checkpoint of its own"
        )
    if latest is None:
        return "starts from the beginning: it has no checkpoint"
    if latest.state != "COMPLETED":
        return (
            f"starts from the beginning: its latest checkpoint {latest.uuid} is "
            f"{latest.state} (checkpoint GC keeps `save_trial_latest` of them)"
        )
    return f"resumes from its latest checkpoint {latest.uuid} ({latest.steps_completed} steps)"


def _continue_trial(session: Session, experiment: Experiment, trial: Trial) -> None:
    searcher = make_searcher(typed_config(experiment))
    saved = experiment.searcher_state
    if isinstance(searcher, SingleSearch) and saved and "snapshot" in saved:
        searcher.restore(saved["snapshot"])
        searcher.continue_trial(trial.request_id)
        experiment.searcher_state = {
            "snapshot": searcher.snapshot(),
            "cursor": saved.get("cursor", 0),
        }
    trial.restarts = 0
    trial.searcher_stopped = False
    trial.searcher_exit = None
    trial.early_exit_reason = None
    trial.progress = None
    task = session.get(Task, trial.task_id)
    if task is not None:  # a continued run starts afresh (Determined gives it a new task)
        task.extra = log_policies.forget_actions(task.extra)
    if trial.state in TRIAL_TERMINAL:
        set_trial_state(session, trial, "ACTIVE")
