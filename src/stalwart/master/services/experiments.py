"""Experiments: user actions on their state, listing and reading them, deleting them.

State actions (platform doc E.2; Determined's ``internalExperiment`` semantics). Each ``apply_*``
function changes rows through :mod:`stalwart.master.transitions` and flushes, never commits, and
returns the :class:`Signals` the caller must deliver **after** committing
(:func:`deliver`: wake each allocation's long-poll). The scheduler reuses them; the API calls the
committing wrappers (:func:`pause_experiment`...).

- pause: ACTIVE -> PAUSED; its ACTIVE trials -> PAUSED; their started allocations are asked to
  preempt (checkpoint and exit), unstarted ones (PENDING, WAITING) end at once. Repeating it is
  a no-op; other states are a 400 naming the state.
- activate: PAUSED -> ACTIVE and its PAUSED trials -> ACTIVE (the scheduler gives them new
  allocations). Repeating it is a no-op; other states are a 400.
- cancel: -> STOPPING_CANCELED; non-terminal trials -> STOPPING_CANCELED with their allocations
  preempted; a trial with nothing running ends CANCELED at once, and the experiment CANCELED once
  no trial is left. Stopping or terminal experiments: a no-op (as Determined).
- kill: -> STOPPING_KILLED; trials too; started allocations are preempted and moved to
  TERMINATING (the resource manager kills what is TERMINATING); trials with nothing running end
  CANCELED, and the experiment CANCELED once no trial is left. STOPPING_KILLED or terminal: no-op.
- kill a trial: the same for one trial; the experiment's state is the searcher's business.
- :func:`settle_trial` / :func:`settle_experiment`: once nothing runs, a stopping trial or
  experiment reaches its terminal state. The scheduler calls them when an allocation ends.

Archived experiments refuse every state action with a 400 (Determined hides them from edits).

Edits (:func:`patch_experiment`, ``det e set ...`` and ``det e label``): name, description and
labels change both the columns and the stored config; ``max_slots``, ``priority`` and ``weight``
change the config's ``resources`` section, which the scheduler reads on every pass, so they take
effect on the experiment's queued and running allocations from the next pass.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import String, cast, delete, func, select, text
from sqlalchemy.orm import Session, defer

from stalwart.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master.api.models.common import paginate
from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Experiment,
    MetricReport,
    MetricRollup,
    MetricSeries,
    Project,
    Task,
    TaskLog,
    Trial,
    TrialMetricSummary,
    User,
    Workspace,
    utcnow,
)
from stalwart.master.services import experiment_columns as columns
from stalwart.master.services.experiment_columns import SortKey
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.models import refuse_experiment_delete
from stalwart.master.services.trials import (
    ACTIVE_SUBSTATES,
    COUNTED_CHECKPOINT_STATES,
    Page,
    most_progressed,
    substate_of_allocation,
    wire_states,
)
from stalwart.master.state import Notifier, allocation_key
from stalwart.master.transitions import (
    EXPERIMENT_TERMINAL,
    LIVE_ALLOCATION_STATES,
    TRIAL_TERMINAL,
    TRIAL_TRANSITIONS,
    set_allocation_state,
    set_experiment_state,
    set_trial_state,
)

__all__ = [
    "UNSTARTED_ALLOCATION_STATES",
    "ExperimentFilters",
    "ExperimentPatch",
    "ExperimentView",
    "Signals",
    "activate_experiment",
    "apply_activate",
    "apply_cancel",
    "apply_error",
    "apply_kill",
    "apply_kill_trial",
    "apply_pause",
    "archive_experiment",
    "best_searcher_metric",
    "best_trials",
    "cancel_experiment",
    "change_label",
    "delete_experiment",
    "deliver",
    "experiment_view",
    "get_experiment",
    "kill_experiment",
    "kill_trial",
    "list_experiments",
    "live_allocations",
    "model_definition_b64",
    "patch_experiment",
    "pause_experiment",
    "settle_experiment",
    "settle_trial",
    "stop_allocations",
]

UNSTARTED_ALLOCATION_STATES = frozenset({"PENDING", "WAITING"})
"""Allocations holding no resources yet: stopping them needs no signal, they just end."""

_STOPPING_TO_TERMINAL = {
    "STOPPING_COMPLETED": "COMPLETED",
    "STOPPING_CANCELED": "CANCELED",
    "STOPPING_KILLED": "CANCELED",
    "STOPPING_ERROR": "ERROR",
}
_DELETABLE = frozenset({"COMPLETED", "CANCELED", "ERROR", "DELETE_FAILED"})


@dataclass
class Signals:
    """Allocations to wake after the commit: asked to preempt, or to be killed (TERMINATING)."""

    preempt: set[str] = field(default_factory=set)
    kill: set[str] = field(default_factory=set)

    def allocation_ids(self) -> set[str]:
        return self.preempt | self.kill

    def merge(self, other: Signals) -> Signals:
        self.preempt |= other.preempt
        self.kill |= other.kill
        return self


def deliver(notifier: Notifier, signals: Signals) -> None:
    """Wake the long-polls of every signalled allocation (call after the commit)."""
    for allocation_id in sorted(signals.allocation_ids()):
        notifier.notify(allocation_key(allocation_id))


# --- state actions (no commit) -------------------------------------------------------------


def live_allocations(session: Session, trial: Trial) -> list[Allocation]:
    """The trial's allocations that have not ended."""
    return list(
        session.scalars(
            select(Allocation).where(
                Allocation.task_id == trial.task_id,
                Allocation.state.in_(LIVE_ALLOCATION_STATES),
            )
        )
    )


def stop_allocations(session: Session, trial: Trial, *, kill: bool) -> Signals:
    """Unstarted allocations end; started ones are asked to preempt (and, to kill, TERMINATE).
    A queued successor (``after_allocation_id``: its agent would start it when the trial ahead
    of it exits, which a pause's preemption makes it do) is killed: it has not run yet."""
    signals = Signals()
    for allocation in live_allocations(session, trial):
        if allocation.state in UNSTARTED_ALLOCATION_STATES:
            set_allocation_state(session, allocation, "TERMINATED")
            continue
        if allocation.after_allocation_id is not None:
            if allocation.state != "TERMINATING":
                set_allocation_state(session, allocation, "TERMINATING")
                signals.kill.add(allocation.id)
            continue
        if not allocation.preempt_requested:
            allocation.preempt_requested = True
            signals.preempt.add(allocation.id)
        if kill and allocation.state != "TERMINATING":
            set_allocation_state(session, allocation, "TERMINATING")
            signals.kill.add(allocation.id)
    return signals


def _trials(session: Session, experiment: Experiment) -> list[Trial]:
    return list(
        session.scalars(
            select(Trial).where(Trial.experiment_id == experiment.id).order_by(Trial.id)
        )
    )


def settle_trial(session: Session, trial: Trial) -> bool:
    """A stopping trial with no live allocation reaches its terminal state; True if it moved."""
    terminal = _STOPPING_TO_TERMINAL.get(trial.state)
    if terminal is None or live_allocations(session, trial):
        return False
    return set_trial_state(session, trial, terminal)


def settle_experiment(session: Session, experiment: Experiment) -> bool:
    """A stopping experiment whose trials are all terminal reaches its terminal state."""
    terminal = _STOPPING_TO_TERMINAL.get(experiment.state)
    if terminal is None:
        return False
    if any(t.state not in TRIAL_TERMINAL for t in _trials(session, experiment)):
        return False
    return set_experiment_state(session, experiment, terminal)


def _refuse_archived(experiment: Experiment) -> None:
    if experiment.archived:
        raise FailedPreconditionError(f"experiment {experiment.id} is archived: unarchive it first")


def apply_pause(session: Session, experiment: Experiment) -> Signals:
    """ACTIVE -> PAUSED (see the module docstring); PAUSED is a no-op."""
    _refuse_archived(experiment)
    if experiment.state == "PAUSED":
        return Signals()
    if experiment.state != "ACTIVE":
        raise FailedPreconditionError(
            f"experiment {experiment.id} is in state STATE_{experiment.state}: "
            "only an active experiment can be paused"
        )
    set_experiment_state(session, experiment, "PAUSED")
    signals = Signals()
    for trial in _trials(session, experiment):
        if trial.state == "ACTIVE":
            set_trial_state(session, trial, "PAUSED")
            signals.merge(stop_allocations(session, trial, kill=False))
    session.flush()
    return signals


def apply_activate(session: Session, experiment: Experiment) -> Signals:
    """PAUSED -> ACTIVE (see the module docstring); ACTIVE is a no-op. Unmanaged experiments
    are refused: their script runs them."""
    _refuse_archived(experiment)
    if experiment.unmanaged:
        raise FailedPreconditionError(
            f"experiment {experiment.id} is unmanaged: the script that reports it runs it "
            "(run the script again to resume it)"
        )
    if experiment.state == "ACTIVE":
        return Signals()
    if experiment.state != "PAUSED":
        raise FailedPreconditionError(
            f"experiment {experiment.id} is in state STATE_{experiment.state}: "
            "only a paused experiment can be activated"
        )
    set_experiment_state(session, experiment, "ACTIVE")
    for trial in _trials(session, experiment):
        if trial.state == "PAUSED":
            set_trial_state(session, trial, "ACTIVE")
    session.flush()
    return Signals()


def _stop_trial(session: Session, trial: Trial, stopping: str) -> Signals:
    """Move a trial to ``stopping`` where the machine allows (stopping states only get more
    severe), stop its allocations, and settle it if nothing runs."""
    if trial.state in TRIAL_TERMINAL:
        return Signals()
    if stopping in TRIAL_TRANSITIONS.get(trial.state, frozenset()):
        set_trial_state(session, trial, stopping)
    signals = stop_allocations(session, trial, kill=stopping == "STOPPING_KILLED")
    settle_trial(session, trial)
    return signals


def _stop_experiment(session: Session, experiment: Experiment, stopping: str) -> Signals:
    signals = Signals()
    for trial in _trials(session, experiment):
        signals.merge(_stop_trial(session, trial, stopping))
    session.flush()
    settle_experiment(session, experiment)
    session.flush()
    return signals


def apply_cancel(session: Session, experiment: Experiment) -> Signals:
    """-> STOPPING_CANCELED, then CANCELED once nothing runs; stopping/terminal: no-op."""
    _refuse_archived(experiment)
    if experiment.state in EXPERIMENT_TERMINAL or experiment.state.startswith(
        ("STOPPING_", "DELET")
    ):
        return Signals()
    set_experiment_state(session, experiment, "STOPPING_CANCELED")
    return _stop_experiment(session, experiment, "STOPPING_CANCELED")


def apply_kill(session: Session, experiment: Experiment) -> Signals:
    """-> STOPPING_KILLED, then CANCELED once nothing runs; killed/terminal: no-op.

    From STOPPING_ERROR (which cannot become STOPPING_KILLED) the allocations are still killed.
    """
    _refuse_archived(experiment)
    state = experiment.state
    if state in EXPERIMENT_TERMINAL or state.startswith("DELET"):
        return Signals()
    if state not in ("STOPPING_KILLED", "STOPPING_ERROR"):
        set_experiment_state(session, experiment, "STOPPING_KILLED")
    return _stop_experiment(session, experiment, "STOPPING_KILLED")


def apply_error(session: Session, experiment: Experiment) -> Signals:
    """-> STOPPING_ERROR (the searcher failed): trials are asked to preempt, and the experiment
    ends ERROR once nothing runs. Terminal or already erroring experiments: no-op."""
    state = experiment.state
    if state in EXPERIMENT_TERMINAL or state.startswith("DELET") or state == "STOPPING_ERROR":
        return Signals()
    set_experiment_state(session, experiment, "STOPPING_ERROR")
    return _stop_experiment(session, experiment, "STOPPING_ERROR")


def apply_kill_trial(session: Session, trial: Trial) -> Signals:
    """One trial -> STOPPING_KILLED, then CANCELED once nothing runs; terminal: no-op."""
    signals = _stop_trial(session, trial, "STOPPING_KILLED")
    session.flush()
    return signals


# --- committing wrappers (the API's entry points) ------------------------------------------


def get_experiment(session: Session, experiment_id: int) -> Experiment:
    """The experiment, or NotFoundError (its model definition is loaded only when read)."""
    experiment = session.get(
        Experiment, experiment_id, options=[defer(Experiment.model_definition)]
    )
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    return experiment


def pause_experiment(session: Session, experiment_id: int) -> Signals:
    """Pause and commit; deliver the returned signals afterwards."""
    signals = apply_pause(session, get_experiment(session, experiment_id))
    session.commit()
    return signals


def activate_experiment(session: Session, experiment_id: int) -> Signals:
    """Activate and commit."""
    signals = apply_activate(session, get_experiment(session, experiment_id))
    session.commit()
    return signals


def cancel_experiment(session: Session, experiment_id: int) -> Signals:
    """Cancel and commit; deliver the returned signals afterwards."""
    signals = apply_cancel(session, get_experiment(session, experiment_id))
    session.commit()
    return signals


def kill_experiment(session: Session, experiment_id: int) -> Signals:
    """Kill and commit; deliver the returned signals afterwards."""
    signals = apply_kill(session, get_experiment(session, experiment_id))
    session.commit()
    return signals


def kill_trial(session: Session, trial_id: int) -> Signals:
    """Kill one trial and commit; deliver the returned signals afterwards."""
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    signals = apply_kill_trial(session, trial)
    session.commit()
    return signals


def archive_experiment(session: Session, experiment_id: int, archived: bool) -> None:
    """Archive (or unarchive) a terminal experiment; commit. Determined's rules and messages."""
    experiment = get_experiment(session, experiment_id)
    if experiment.archived == archived:
        raise FailedPreconditionError(
            "Experiment is already archived." if archived else "Experiment is not archived."
        )
    if experiment.state not in EXPERIMENT_TERMINAL:
        raise FailedPreconditionError(
            f"Experiment is not in terminal state. (experiment {experiment_id} is "
            f"STATE_{experiment.state}; only COMPLETED, CANCELED or ERROR ones can be "
            f"{'archived' if archived else 'unarchived'})"
        )
    experiment.archived = archived
    session.commit()


MAX_NOTES = 1_000_000
"""The longest experiment notes accepted (characters), as a bound on a row, not a style rule."""


@dataclass(frozen=True)
class ExperimentPatch:
    """A partial edit of an experiment; None leaves a field as it is.

    ``labels`` is the complete new list (duplicates are dropped, order kept);
    ``clear_max_slots`` removes ``resources.max_slots`` (``det e set max-slots ID none``).
    """

    name: str | None = None
    description: str | None = None
    labels: Sequence[str] | None = None
    notes: str | None = None
    max_slots: int | None = None
    priority: int | None = None
    weight: float | None = None
    clear_max_slots: bool = False


def patch_experiment(session: Session, experiment_id: int, patch: ExperimentPatch) -> Experiment:
    """Apply ``patch`` to an experiment and its stored config; commit; return the experiment.

    404 if it does not exist; 400 (nothing changed) if it is archived, the name is blank or
    longer than 255 characters, a label is blank, ``priority`` is outside 1-99, ``weight`` is
    not positive or ``max_slots`` is below 1. An empty patch changes nothing.
    """
    experiment = get_experiment(session, experiment_id)
    if experiment.archived:
        raise FailedPreconditionError(
            f"experiment ({experiment_id}) is archived and cannot have attributes updated."
        )
    config = json.loads(json.dumps(experiment.config or {}))
    resources = config.get("resources")
    resources = dict(resources) if isinstance(resources, dict) else {}
    if patch.name is not None:
        name = patch.name.strip()
        if not name:
            raise InvalidArgumentError("`name` must not be an empty or whitespace string.")
        if len(name) > 255:
            raise InvalidArgumentError("`name` must be at most 255 characters long.")
        experiment.name = name
        config["name"] = name
    if patch.description is not None:
        experiment.description = patch.description
        config["description"] = patch.description
    if patch.notes is not None:
        if len(patch.notes) > MAX_NOTES:
            raise InvalidArgumentError(
                f"notes must be at most {MAX_NOTES:,} characters long (got {len(patch.notes):,})"
            )
        experiment.notes = patch.notes  # free text: not part of the config
    if patch.labels is not None:
        labels = list(dict.fromkeys(patch.labels))
        if any(not label.strip() for label in labels):
            raise InvalidArgumentError("labels must not be empty or whitespace strings.")
        experiment.labels = labels
        config["labels"] = labels
    if patch.priority is not None:
        if not 1 <= patch.priority <= 99:
            raise InvalidArgumentError(f"priority must be between 1 and 99 (got {patch.priority})")
        resources["priority"] = patch.priority
    if patch.weight is not None:
        if not patch.weight > 0:
            raise InvalidArgumentError(f"weight must be greater than 0 (got {patch.weight})")
        resources["weight"] = patch.weight
    if patch.max_slots is not None:
        if patch.max_slots < 1:
            raise InvalidArgumentError(f"max_slots must be at least 1 (got {patch.max_slots})")
        resources["max_slots"] = patch.max_slots
    elif patch.clear_max_slots:
        resources.pop("max_slots", None)
    if resources or "resources" in config:
        config["resources"] = resources
    experiment.config = config
    session.commit()
    return experiment


_LABELS_LOCK = threading.Lock()


def change_label(session: Session, experiment_id: int, label: str, *, add: bool) -> list[str]:
    """Add ``label`` to an experiment's labels (at the end) or remove it; commit; return the
    labels now (``PUT`` / ``DELETE /api/v1/experiments/{id}/labels/{label}``, the SDK's
    ``add_label`` / ``remove_label``).

    Adding a label it has and removing one it lacks change nothing, as on Determined, which
    does not refuse archived experiments here either. Concurrent calls do not lose each
    other's changes: the read-change-write holds this process's lock and the row's lock (on
    PostgreSQL). 404 for an unknown experiment; 400 for a blank label.
    """
    if not label.strip():
        raise InvalidArgumentError("labels must not be empty or whitespace strings.")
    with _LABELS_LOCK:
        session.rollback()  # read the committed labels, not a snapshot taken before the lock
        experiment = session.get(
            Experiment,
            experiment_id,
            options=[defer(Experiment.model_definition)],
            with_for_update=True,
            populate_existing=True,
        )
        if experiment is None:
            raise NotFoundError(f"experiment {experiment_id} not found")
        labels = [str(x) for x in experiment.labels or []]
        changed = [*labels, label] if add else [x for x in labels if x != label]
        if (label in labels) != add:
            config = json.loads(json.dumps(experiment.config or {}))
            config["labels"] = changed
            experiment.labels = changed
            experiment.config = config
            labels = changed
        session.commit()
    return labels


def delete_experiment(session: Session, user: User, experiment_id: int) -> None:
    """Delete a terminal experiment with its trials, tasks, metrics, checkpoints and logs.

    Who may is :mod:`stalwart.master.policy`'s rule (checked for every request on the
    experiment's path). Archived experiments may be deleted. Checkpoint files in storage are
    not removed here. An experiment with checkpoints in the model registry is refused.
    """
    experiment = get_experiment(session, experiment_id)
    if experiment.state not in _DELETABLE:
        raise FailedPreconditionError(
            f"cannot delete experiment in STATE_{experiment.state} state: experiment "
            f"{experiment_id} must be COMPLETED, CANCELED or ERROR first (kill it)"
        )
    refuse_experiment_delete(session, user, experiment_id)  # registered checkpoints stay
    set_experiment_state(session, experiment, "DELETING")
    set_experiment_state(session, experiment, "DELETED")
    session.flush()
    trial_ids = select(Trial.id).where(Trial.experiment_id == experiment_id)
    task_ids = select(Task.task_id).where(Task.experiment_id == experiment_id)
    session.execute(delete(MetricReport).where(MetricReport.trial_id.in_(trial_ids)))
    session.execute(delete(TrialMetricSummary).where(TrialMetricSummary.trial_id.in_(trial_ids)))
    session.execute(delete(MetricRollup).where(MetricRollup.trial_id.in_(trial_ids)))
    session.execute(delete(MetricSeries).where(MetricSeries.trial_id.in_(trial_ids)))
    session.execute(
        delete(Checkpoint).where(
            (Checkpoint.experiment_id == experiment_id) | Checkpoint.trial_id.in_(trial_ids)
        )
    )
    session.execute(delete(TaskLog).where(TaskLog.task_id.in_(task_ids)))
    session.execute(delete(Allocation).where(Allocation.task_id.in_(task_ids)))
    session.execute(delete(Trial).where(Trial.experiment_id == experiment_id))
    session.execute(delete(Task).where(Task.experiment_id == experiment_id))
    session.execute(delete(Experiment).where(Experiment.id == experiment_id))
    session.expunge(experiment)
    session.commit()


def model_definition_b64(session: Session, experiment_id: int) -> str:
    """The model definition archive, base64 (``""`` when the experiment has none)."""
    blob = session.scalar(select(Experiment.model_definition).where(Experiment.id == experiment_id))
    if blob is None and session.get(Experiment, experiment_id) is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    return base64.b64encode(blob or b"").decode()


def best_searcher_metric(session: Session, experiment_id: int) -> float:
    """The best searcher metric value of the experiment's trials; NotFoundError when none yet."""
    experiment = get_experiment(session, experiment_id)
    agg = func.min if typed_config(experiment).searcher.smaller_is_better else func.max
    value = session.scalar(
        select(agg(Trial.searcher_metric_value)).where(Trial.experiment_id == experiment_id)
    )
    if value is None:
        raise NotFoundError(
            f"experiment {experiment_id} has no validation metrics with its searcher metric yet"
        )
    return float(value)


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentFilters:
    """Filters and order of GET /experiments (every field optional)."""

    archived: bool | None = None
    users: Sequence[str] = ()
    user_ids: Sequence[int] = ()
    states: Sequence[str] = ()
    name: str | None = None
    description: str | None = None
    labels: Sequence[str] = ()
    project_id: int | None = None
    workspace_id: int | None = None
    """Only the experiments of this workspace's projects (a Stalwart extension)."""
    id_gt: int | None = None
    id_gte: int | None = None
    id_lt: int | None = None
    id_lte: int | None = None
    id_in: Sequence[int] = ()
    id_not_in: Sequence[int] = ()
    sort_by: str = "SORT_BY_ID"
    order_desc: bool = False
    sort: Sequence[SortKey] = ()
    """Sort keys (:mod:`stalwart.master.services.experiment_columns`); when given, they
    replace ``sort_by`` and ``order_desc``."""
    condition: Any = None
    """A further condition on ``experiments`` (a parsed filter,
    :func:`stalwart.master.services.experiment_columns.parse_filter`)."""
    show_trial_data: bool = False
    hidden_project_ids: Sequence[int] = ()
    """Projects the caller may not see (:func:`stalwart.master.policy.hidden_project_ids`)."""


@dataclass(frozen=True)
class ExperimentView:
    """An experiment and everything the API shows about it."""

    experiment: Experiment
    state: str
    username: str
    display_name: str | None
    project_name: str
    project_owner_id: int
    workspace_id: int
    workspace_name: str
    parent_archived: bool
    num_trials: int
    checkpoint_count: int
    checkpoint_size: int
    duration: int
    trial_ids: list[int] | None = None
    best_trial_id: int | None = None
    best_trial_metric: float | None = None
    job_summary: tuple[str, int] | None = None


def _where(filters: ExperimentFilters) -> list[Any]:
    """Conditions on ``experiments`` alone (other tables through small subqueries), so that
    counting and paging never join every experiment to its owner and project."""
    where: list[Any] = []
    if filters.archived is not None:
        where.append(Experiment.archived.is_(filters.archived))
        if not filters.archived and not filters.project_id:
            # Determined also hides experiments of archived projects and workspaces here.
            live_workspaces = select(Workspace.id).where(Workspace.archived.is_(False))
            live_projects = select(Project.id).where(
                Project.archived.is_(False), Project.workspace_id.in_(live_workspaces)
            )
            where.append(Experiment.project_id.in_(live_projects))
    if filters.users:
        owners = select(User.id).where(User.username.in_(list(filters.users)))
        where.append(Experiment.owner_id.in_(owners))
    if filters.user_ids:
        where.append(Experiment.owner_id.in_(list(filters.user_ids)))
    stored = wire_states(filters.states)
    if stored:
        where.append(Experiment.state.in_(stored))
    if filters.name:
        where.append(Experiment.name.icontains(filters.name, autoescape=True))
    if filters.description:
        where.append(Experiment.description.icontains(filters.description, autoescape=True))
    for label in filters.labels:
        where.append(_has_label(label))
    if filters.project_id:
        where.append(Experiment.project_id == filters.project_id)
    if filters.workspace_id:
        in_workspace = select(Project.id).where(Project.workspace_id == filters.workspace_id)
        where.append(Experiment.project_id.in_(in_workspace))
    if filters.hidden_project_ids:
        where.append(Experiment.project_id.not_in(list(filters.hidden_project_ids)))
    bounds = (
        (filters.id_gt, Experiment.id.__gt__),
        (filters.id_gte, Experiment.id.__ge__),
        (filters.id_lt, Experiment.id.__lt__),
        (filters.id_lte, Experiment.id.__le__),
    )
    where += [op(value) for value, op in bounds if value is not None]
    if filters.id_in:
        where.append(Experiment.id.in_(list(filters.id_in)))
    if filters.id_not_in:
        where.append(Experiment.id.not_in(list(filters.id_not_in)))
    if filters.condition is not None:
        where.append(filters.condition)
    return where


def _has_label(label: str) -> Any:
    """Labels are a JSON list of strings: match the label's JSON text inside the list's text."""
    return cast(Experiment.labels, String).contains(json.dumps(label), autoescape=True)


def _owner_index_covers(filters: ExperimentFilters) -> bool:
    """Whether the filters read only ``id`` and ``owner_id`` (the owner index has both)."""
    return (
        filters.archived is None
        and not filters.states
        and not filters.name
        and not filters.description
        and not filters.labels
        and not filters.project_id
        and not filters.workspace_id
        and not filters.hidden_project_ids
        and filters.condition is None
    )


def _rows_query() -> Any:
    """Experiments with their owner, project and workspace (for a known, small set of ids)."""
    return (
        select(
            Experiment,
            User.username,
            User.display_name,
            Project.name,
            Project.user_id,
            Project.workspace_id,
            Workspace.name,
            Project.archived | Workspace.archived,
        )
        .join(User, User.id == Experiment.owner_id)
        .join(Project, Project.id == Experiment.project_id)
        .join(Workspace, Workspace.id == Project.workspace_id)
        .options(defer(Experiment.model_definition), defer(Experiment.searcher_state))
    )


def list_experiments(
    session: Session, filters: ExperimentFilters, *, offset: int = 0, limit: int = 0
) -> Page[ExperimentView]:
    """One page of experiments in a fixed number of queries (no N+1).

    The page's ids (and the total) come from ``experiments`` alone; then the page's rows with
    their owner and project; then one batched query each for trial counts, checkpoint totals
    and live allocations. Without filters on row data, the ids come from a narrow index (a
    deep page costs no more than the first); with them, one scan yields both the ids and the
    total (``count(*) over ()``).
    """
    where = _where(filters)
    keys = list(filters.sort) or [SortKey(filters.sort_by, filters.order_desc)]
    dialect = session.get_bind().dialect.name
    order = columns.order_by(keys, dialect)
    if dialect == "postgresql":
        # The per-experiment subqueries of computed columns make the planner's estimate large
        # enough to JIT-compile the query: 200 ms of compiling for 60 ms of running.
        session.execute(text("SET LOCAL jit = off"))
    narrow = _owner_index_covers(filters)
    ids_query = select(Experiment.id).where(*where)
    if len(order) == 1 and narrow and not filters.users:
        # Always true (a foreign key), but it makes SQLite walk the narrow owner index, which
        # holds every id, instead of the wide table rows (a deep page: 1 ms instead of 7).
        ids_query = ids_query.where(Experiment.owner_id.in_(select(User.id)))
    # nulls last both ways, then the id (never null), which alone walks the primary key index
    ids_query = ids_query.order_by(*order)
    ids: list[int] = []
    total: int | None = None
    if not narrow and offset >= 0:
        counted = session.execute(
            ids_query.add_columns(func.count().over()).offset(offset).limit(limit or None)
        ).all()
        ids = [row[0] for row in counted]
        total = int(counted[0][1]) if counted else None
    if total is None:
        count_query = select(func.count()).select_from(Experiment).where(*where)
        total = session.scalar(count_query) or 0
    start, end, pagination = paginate(total, offset, limit)
    if end <= start:
        return Page([], pagination)
    if not ids:
        ids = list(session.scalars(ids_query.offset(start).limit(end - start)))
    found = {row[0].id: row for row in session.execute(_rows_query().where(Experiment.id.in_(ids)))}
    rows = [found[i] for i in ids if i in found]
    return Page(_views(session, rows), pagination)


def _views(session: Session, rows: Sequence[Any]) -> list[ExperimentView]:
    ids = [row[0].id for row in rows]
    counts = dict(
        session.execute(
            select(Trial.experiment_id, func.count())
            .where(Trial.experiment_id.in_(ids))
            .group_by(Trial.experiment_id)
        ).all()
    )
    checkpoints = {
        exp_id: (int(count), int(size or 0))
        for exp_id, count, size in session.execute(
            select(Checkpoint.experiment_id, func.count(), func.sum(Checkpoint.size))
            .where(
                Checkpoint.experiment_id.in_(ids),
                Checkpoint.state.in_(COUNTED_CHECKPOINT_STATES),
            )
            .group_by(Checkpoint.experiment_id)
        )
    }
    substates = _experiment_substates(
        session, [row[0].id for row in rows if row[0].state == "ACTIVE"]
    )
    best = best_trials(session, [row[0] for row in rows])
    now = utcnow()
    views = []
    for exp, username, display, p_name, p_owner, ws_id, ws_name, parent_archived in rows:
        count, size = checkpoints.get(exp.id, (0, 0))
        state = exp.state
        if state == "ACTIVE":  # an unmanaged one runs where its script runs
            state = "RUNNING" if exp.unmanaged else most_progressed(substates.get(exp.id, ()))
        best_id, best_value = best.get(exp.id, (None, None))
        views.append(
            ExperimentView(
                experiment=exp,
                state=state,
                username=username,
                display_name=display,
                project_name=p_name,
                project_owner_id=p_owner or 1,
                workspace_id=ws_id,
                workspace_name=ws_name,
                parent_archived=bool(parent_archived),
                num_trials=int(counts.get(exp.id, 0)),
                checkpoint_count=count,
                checkpoint_size=size,
                duration=_duration(exp.start_time, exp.end_time or now),
                best_trial_id=best_id,
                best_trial_metric=best_value,
            )
        )
    return views


def _duration(start: dt.datetime, end: dt.datetime) -> int:
    return max(0, int((end - start).total_seconds()))


def _experiment_substates(session: Session, experiment_ids: Iterable[int]) -> dict[int, list[str]]:
    """Substates of the live allocations of each experiment's trials (one query)."""
    ids = sorted(set(experiment_ids))
    out: dict[int, list[str]] = {}
    if not ids:
        return out
    rows = session.execute(
        select(Task.experiment_id, Allocation.state)
        .join(Task, Task.task_id == Allocation.task_id)
        .where(Task.experiment_id.in_(ids), Allocation.state != "TERMINATED")
    )
    for exp_id, state in rows:
        if exp_id is not None:
            out.setdefault(exp_id, []).append(substate_of_allocation(state))
    return out


def best_trials(
    session: Session, experiments: Sequence[Experiment]
) -> dict[int, tuple[int, float]]:
    """``{experiment id: (best trial id, its searcher metric value)}`` of those experiments
    whose trials have a searcher metric value (by each one's ``smaller_is_better``): the
    values the metric ingest keeps on the experiment row, so no query is needed."""
    del session  # kept for callers: the values are on the rows
    return {
        e.id: (e.best_trial_id, e.best_searcher_metric)
        for e in experiments
        if e.best_trial_id is not None and e.best_searcher_metric is not None
    }


def experiment_view(session: Session, experiment_id: int) -> ExperimentView:
    """One experiment with its trial ids, best trial and job summary (404 if unknown)."""
    row = session.execute(_rows_query().where(Experiment.id == experiment_id)).first()
    if row is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    view = _views(session, [row])[0]
    trial_ids = list(
        session.scalars(
            select(Trial.id).where(Trial.experiment_id == experiment_id).order_by(Trial.id)
        )
    )
    summary = None
    if view.state in ACTIVE_SUBSTATES and not view.experiment.unmanaged:  # not in the queue
        summary = ("STATE_QUEUED" if view.state == "QUEUED" else "STATE_SCHEDULED", 0)
    return replace(view, trial_ids=trial_ids, job_summary=summary)
