"""The only code that changes the state of an experiment, trial, allocation, container or
checkpoint.

Each ``set_*_state`` checks the edge against Determined's state machine (platform doc E.2),
writes the new state (and end times), and queues a :class:`StateChanged` event on the session;
the events are published to the :class:`EventBus` after the transaction commits, never before.
An edge the machine does not allow raises :class:`~stalwart.errors.InvalidTransitionError`;
setting the current state again is a no-op (idempotent).

States are stored without Determined's ``STATE_`` prefix (``ACTIVE``, ``STOPPING_KILLED``...).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import event
from sqlalchemy.orm import Session

from stalwart.errors import InvalidTransitionError
from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Container,
    Experiment,
    Task,
    Trial,
    utcnow,
)

__all__ = [
    "ALLOCATION_STATES",
    "CONTAINER_STATES",
    "EXPERIMENT_TERMINAL",
    "EXPERIMENT_TRANSITIONS",
    "LIVE_ALLOCATION_STATES",
    "PLACED_ALLOCATION_STATES",
    "TRIAL_TERMINAL",
    "TRIAL_TRANSITIONS",
    "EventBus",
    "StateChanged",
    "check_edge",
    "install_event_publisher",
    "log_experiment_change",
    "set_allocation_state",
    "set_checkpoint_state",
    "set_container_state",
    "set_experiment_state",
    "set_trial_state",
]

log = logging.getLogger(__name__)

Kind = Literal["experiment", "trial", "allocation", "container", "checkpoint"]

_STOPPING = ("STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR")

EXPERIMENT_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "ACTIVE": frozenset({"PAUSED", *_STOPPING, "DELETING"}),
    "PAUSED": frozenset({"ACTIVE", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR"}),
    "STOPPING_COMPLETED": frozenset(
        {"COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR"}
    ),
    "STOPPING_CANCELED": frozenset({"CANCELED", "STOPPING_KILLED", "STOPPING_ERROR"}),
    "STOPPING_KILLED": frozenset({"CANCELED", "STOPPING_ERROR"}),
    "STOPPING_ERROR": frozenset({"ERROR", "ACTIVE"}),
    "COMPLETED": frozenset({"DELETING", "ACTIVE"}),
    "CANCELED": frozenset({"DELETING", "ACTIVE"}),
    "ERROR": frozenset({"DELETING", "ACTIVE"}),
    "DELETING": frozenset({"DELETED", "DELETE_FAILED"}),
    "DELETE_FAILED": frozenset({"DELETING"}),
    "DELETED": frozenset(),
}
"""Experiment edges: ACTIVE <-> PAUSED, stopping states that only get more severe, terminal
states that may be deleted or continued (back to ACTIVE: ``det e continue``,
:mod:`stalwart.master.services.experiment_continue`)."""

EXPERIMENT_TERMINAL = frozenset({"COMPLETED", "CANCELED", "ERROR", "DELETED"})

TRIAL_TRANSITIONS: Mapping[str, frozenset[str]] = {
    **{k: v for k, v in EXPERIMENT_TRANSITIONS.items() if not k.startswith("DELET")},
    "ACTIVE": frozenset({"PAUSED", *_STOPPING, "COMPLETED"}),
    "COMPLETED": frozenset({"ACTIVE"}),
    "CANCELED": frozenset({"ACTIVE"}),
    "ERROR": frozenset({"ACTIVE"}),
}
"""Trial edges: the experiment's, plus an early exit straight to COMPLETED and terminal states
that may be continued (back to ACTIVE)."""

TRIAL_TERMINAL = frozenset({"COMPLETED", "CANCELED", "ERROR"})

ALLOCATION_STATES = (
    "PENDING",
    "WAITING",
    "ASSIGNED",
    "PULLING",
    "STARTING",
    "RUNNING",
    "TERMINATING",
    "TERMINATED",
)
"""Allocation states in order; an allocation only moves forward."""

LIVE_ALLOCATION_STATES = ALLOCATION_STATES[:-1]
"""Every state but TERMINATED. Query with ``state.in_(LIVE_ALLOCATION_STATES)`` rather than
``state != 'TERMINATED'``: the state index serves it, so the cost does not grow with history."""

PLACED_ALLOCATION_STATES = ALLOCATION_STATES[2:-1]
"""ASSIGNED to TERMINATING: the states of an allocation that holds its slots (or its engine
job)."""

CONTAINER_STATES = ("ASSIGNED", "STARTING", "RUNNING", "EXITED")
"""Container states in order; a container only moves forward (an engine may skip states: a
container that never started goes from ASSIGNED to EXITED)."""

CHECKPOINT_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "ACTIVE": frozenset({"COMPLETED", "ERROR"}),
    "COMPLETED": frozenset({"PARTIALLY_DELETED", "DELETED"}),
    "PARTIALLY_DELETED": frozenset({"DELETED"}),
    "ERROR": frozenset({"DELETED"}),
    "DELETED": frozenset(),
}


@dataclass(frozen=True)
class StateChanged:
    """Published after commit when a state changed."""

    kind: Kind
    id: str
    old: str
    new: str


def check_edge(kind: Kind, old: str, new: str) -> None:
    """Raise InvalidTransitionError unless ``old -> new`` is an edge of ``kind``'s machine."""
    if old == new:
        return
    if kind in ("allocation", "container"):
        order = ALLOCATION_STATES if kind == "allocation" else CONTAINER_STATES
        if old in order and new in order and order.index(new) > order.index(old):
            return
    else:
        table = {
            "experiment": EXPERIMENT_TRANSITIONS,
            "trial": TRIAL_TRANSITIONS,
            "checkpoint": CHECKPOINT_TRANSITIONS,
        }[kind]
        if new in table.get(old, frozenset()):
            return
    raise InvalidTransitionError(f"a {kind} in state {old} cannot become {new}")


def _queue(session: Session, change: StateChanged) -> None:
    session.info.setdefault("state_changes", []).append(change)


def set_experiment_state(session: Session, experiment: Experiment, new: str) -> bool:
    """Move an experiment to ``new``; returns False when it already was in ``new``."""
    old = experiment.state
    check_edge("experiment", old, new)
    if old == new:
        return False
    experiment.state = new
    if new in EXPERIMENT_TERMINAL and experiment.end_time is None:
        experiment.end_time = utcnow()
    elif new == "ACTIVE":
        experiment.end_time = None
    _queue(session, StateChanged("experiment", str(experiment.id), old, new))
    return True


def set_trial_state(session: Session, trial: Trial, new: str) -> bool:
    """Move a trial to ``new``; returns False when it already was in ``new``."""
    old = trial.state
    check_edge("trial", old, new)
    if old == new:
        return False
    trial.state = new
    task = session.get(Task, trial.task_id) if trial.task_id else None
    if new in TRIAL_TERMINAL:
        trial.end_time = utcnow()
    elif new == "ACTIVE":
        trial.end_time = None
    if task is not None:  # a trial's task ends (and reopens) with it
        task.end_time = trial.end_time
    _queue(session, StateChanged("trial", str(trial.id), old, new))
    return True


def set_allocation_state(session: Session, allocation: Allocation, new: str) -> bool:
    """Move an allocation forward to ``new``; returns False when it already was in ``new``."""
    old = allocation.state
    check_edge("allocation", old, new)
    if old == new:
        return False
    allocation.state = new
    if new == "TERMINATED":
        allocation.end_time = utcnow()
    _queue(session, StateChanged("allocation", allocation.id, old, new))
    return True


def set_container_state(
    session: Session,
    container: Container,
    new: str,
    *,
    exit_code: int | None = None,
    reason: str | None = None,
) -> bool:
    """Move a container forward to ``new``; returns False when it already was in ``new`` (an
    exit already recorded keeps its code and reason: the first word wins). EXITED records
    ``exit_code`` (None: the task gave none: lost, killed before it started, refused by the
    engine), ``reason`` and the exit time. Every engine's news about a container (agent syncs,
    batch launchers, Slurm/PBS polls, Kubernetes watches) comes through here."""
    old = container.state
    check_edge("container", old, new)
    if old == new:
        return False
    container.state = new
    if new == "EXITED":
        container.exit_code = exit_code
        container.exit_reason = reason
        container.exited_at = utcnow()
    key = f"{container.allocation_id}/{container.rank}"
    _queue(session, StateChanged("container", key, old, new))
    return True


def set_checkpoint_state(session: Session, checkpoint: Checkpoint, new: str) -> bool:
    """Move a checkpoint to ``new``; returns False when it already was in ``new``."""
    old = checkpoint.state
    check_edge("checkpoint", old, new)
    if old == new:
        return False
    checkpoint.state = new
    _queue(session, StateChanged("checkpoint", checkpoint.uuid, old, new))
    return True


Listener = Callable[[StateChanged], None]


class EventBus:
    """In-process publish/subscribe of committed state changes (thread-safe).

    Listeners run on the committing thread and must not block or raise; a listener that raises
    is dropped from that delivery only (the commit has already happened).
    """

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns a function that removes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def publish(self, change: StateChanged) -> None:
        """Deliver one change to every listener."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(change)
            except Exception:  # a broken listener must not break commits
                continue


def log_experiment_change(change: StateChanged) -> None:
    """An :class:`EventBus` listener that logs each committed experiment state change at INFO
    (``experiment 5: ACTIVE -> COMPLETED``): what an operator reads in ``det master logs``."""
    if change.kind == "experiment":
        log.info("experiment %s: %s -> %s", change.id, change.old, change.new)


def install_event_publisher(session_factory: Callable[..., Session], bus: EventBus) -> None:
    """Publish the queued state changes of every session made by ``session_factory`` on commit.

    Changes of a rolled-back transaction are discarded.
    """

    @event.listens_for(session_factory, "after_commit")
    def _publish(session: Session) -> None:
        for change in session.info.pop("state_changes", []):
            bus.publish(change)

    @event.listens_for(session_factory, "after_rollback")
    def _discard(session: Session) -> None:
        session.info.pop("state_changes", None)
