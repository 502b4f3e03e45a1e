"""The searcher interface, and the trial bookkeeping every built-in searcher shares.

A searcher is pure logic: no database, no I/O, no clock. The master calls it and carries out the
actions it returns, in order; between calls the searcher's state is :meth:`SearchMethod.snapshot`.

Contracts of :class:`SearchMethod` (the master's side):

- ``initial_actions()`` once, on a new searcher (never after ``restore``).
- Every :class:`~stalwart.master.searcher.actions.Create` becomes a trial; its ``request_id``
  names that trial in every later call. The master must carry out a ``Create`` (or report the
  trial as exited) so the search can finish.
- ``on_validation(request_id, metrics)`` for every validation report (``group: validation``),
  with its ``avgMetrics`` mapping. Reports of trials that were stopped or exited are ignored.
- Exactly one exit per trial: ``on_trial_exited`` (exited 0, or stopped by the searcher or by
  the master) or ``on_trial_exited_early`` (errored for good, canceled by a user, or reported
  invalid hyperparameters), called once the trial no longer runs. A second exit report for the
  same trial is ignored (Determined calls both for an early exit; either order is safe).
- Unknown request ids raise :class:`SearcherStateError` (a master bug, not a user error).
- A searcher never has more than :attr:`SearchMethod.max_concurrent_trials` trials created and
  not exited (0: no limit). Replacements are created when a trial exits, never before.
- Exactly one :class:`~stalwart.master.searcher.actions.Shutdown`, returned with the exit of the
  last trial once nothing more will be created; after it every call returns ``[]``.
- ``snapshot()`` is JSON-ready (no NaN/infinity); ``restore(snapshot)`` on a searcher made from
  the same experiment config continues exactly where the snapshot was taken, random draws
  included.

Metrics (ASHA searchers; single, random and grid do not read them, as in Determined): the
``searcher.metric`` value must be a number (bool is not); the strings ``"NaN"``, ``"Infinity"``
and ``"-Infinity"`` are read as those floats. NaN counts as the worst possible result (the trial
is stopped rather than the experiment failed). A missing or non-numeric value raises
:class:`SearcherMetricError`; Determined moves the experiment to STOPPING_ERROR with that message,
and the master should do the same.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.errors import InvalidArgumentError, StalwartError
from stalwart.master.searcher.actions import Action, Create, Shutdown, Stop
from stalwart.master.searcher.sampling import SearchRandom

__all__ = [
    "WORST_METRIC",
    "ExitedReason",
    "SearchMethod",
    "SearcherMetricError",
    "SearcherStateError",
    "TrackedSearch",
    "read_number",
]

SNAPSHOT_VERSION = 1

WORST_METRIC = sys.float_info.max
"""The value ranked below every real result (exited trials, NaN); finite so snapshots stay JSON."""

_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class ExitedReason(StrEnum):
    """Why a trial ended early (Determined's ``ExitedReason``)."""

    ERRORED = "ERRORED"
    USER_CANCELED = "USER_CANCELED"
    INVALID_HP = "INVALID_HP"
    INIT_INVALID_HP = "INIT_INVALID_HP"

    @property
    def invalid_hp(self) -> bool:
        """The trial rejected its hyperparameters (it does not count against ``max_trials``)."""
        return self in (ExitedReason.INVALID_HP, ExitedReason.INIT_INVALID_HP)


class SearcherMetricError(InvalidArgumentError):
    """A validation report lacks the searcher metric (or ASHA's time metric), or it is no number."""

    code = "invalid_searcher_metric"


class SearcherStateError(StalwartError):
    """The master called a searcher out of contract (unknown trial, bad snapshot, ...)."""

    code = "searcher_state"


def read_number(metrics: Mapping[str, Any], key: str, *, role: str) -> float:
    """The float value of ``metrics[key]``; ``role`` names it in the error message."""
    value = metrics.get(key)
    if isinstance(value, str) and value in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        found = "it is missing" if key not in metrics else f"got {value!r}"
        names = ", ".join(sorted(map(str, metrics))) or "none"
        raise SearcherMetricError(
            f"the validation metrics must carry the {role} {key!r} as a number ({found}); "
            f"reported metrics: {names}",
            hint="report it with every validation, or fix the name in the searcher config",
        )
    return float(value)


class SearchMethod(ABC):
    """A hyperparameter search: decides which trials to create and which to stop early."""

    name: ClassVar[str]
    """The searcher's config name (``random``, ``async_halving``...)."""

    @property
    @abstractmethod
    def max_concurrent_trials(self) -> int:
        """Most trials created and not yet exited at any time; 0 means no limit."""

    @abstractmethod
    def initial_actions(self) -> list[Action]:
        """The first trials to create. Call once, on a new searcher."""

    @abstractmethod
    def on_validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        """A trial reported validation metrics (its ``avgMetrics``). May raise
        :class:`SearcherMetricError` (see the module docstring)."""

    @abstractmethod
    def on_trial_progress(self, request_id: str, progress: float) -> None:
        """A trial reported its own progress (fraction of its training); feeds :meth:`progress`."""

    @abstractmethod
    def on_trial_exited(self, request_id: str) -> list[Action]:
        """The trial finished: it exited 0 or was stopped. May create a replacement or shut down."""

    @abstractmethod
    def on_trial_exited_early(self, request_id: str, reason: ExitedReason) -> list[Action]:
        """The trial ended early: errored (restarts used up), canceled, or invalid hyperparameters.
        Random and ASHA searchers replace a trial with invalid hyperparameters."""

    @abstractmethod
    def progress(self) -> float:
        """How far the search is, in ``[0, 1]`` (1 once it has shut down)."""

    @abstractmethod
    def snapshot(self) -> dict[str, Any]:
        """The whole state, JSON-ready, random generator included."""

    @abstractmethod
    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Continue from :meth:`snapshot` (on a searcher built from the same config)."""


@dataclass
class _Trial:
    group: int
    live: bool = True
    stopped: bool = False
    reason: ExitedReason | None = None
    progress: float = 0.0

    def to_list(self) -> list[Any]:
        reason = None if self.reason is None else self.reason.value
        return [self.group, self.live, self.stopped, reason, self.progress]

    @classmethod
    def from_list(cls, data: list[Any]) -> _Trial:
        group, live, stopped, reason, progress = data
        return cls(
            int(group),
            bool(live),
            bool(stopped),
            None if reason is None else ExitedReason(reason),
            float(progress),
        )


class TrackedSearch(SearchMethod):
    """Shared machinery: trial table, liveness, Shutdown, progress, snapshot envelope.

    Subclasses implement the hooks ``_initial``, ``_validation``, ``_exited``, ``_state``,
    ``_load``, ``_planned_trials`` and the ``max_concurrent_trials`` property, and create trials
    only through :meth:`_create`. Trials belong to a group (an ASHA bracket; 0 elsewhere).
    """

    replaces_invalid: ClassVar[bool] = True
    """Whether trials with invalid hyperparameters are replaced (and so not counted in progress)."""

    def __init__(self, hyperparameters: Mapping[str, Hyperparameter], seed: int) -> None:
        self._hps = hyperparameters
        self._rng = SearchRandom(seed)
        self._trials: dict[str, _Trial] = {}
        self._live: dict[int, int] = {}
        self._invalid: dict[int, int] = {}
        self._started = False
        self._shut = False

    # -- hooks ---------------------------------------------------------------------------------

    @abstractmethod
    def _initial(self) -> list[Action]: ...

    def _validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        """React to a validation of a live, not stopped trial (default: nothing)."""
        return []

    @abstractmethod
    def _exited(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        """React to an exit (``reason`` None: a normal exit); the trial is no longer live."""

    @abstractmethod
    def _planned_trials(self) -> int:
        """How many (valid) trials the finished search will have run."""

    def _state(self) -> dict[str, Any]:
        return {}

    def _load(self, state: Mapping[str, Any]) -> None:
        return None

    # -- helpers for subclasses ----------------------------------------------------------------

    def _create(self, hparams: dict[str, Any], group: int = 0) -> Create:
        limit = self.max_concurrent_trials
        if limit and self.live_trials() >= limit:
            raise SearcherStateError(f"{self.name}: would exceed {limit} concurrent trials")
        request_id = self._rng.request_id()
        create = Create(request_id=request_id, hparams=hparams, trial_seed=self._rng.trial_seed())
        self._trials[request_id] = _Trial(group)
        self._live[group] = self._live.get(group, 0) + 1
        return create

    def live_trials(self, group: int | None = None) -> int:
        """Trials created and not exited (in ``group``, or in all)."""
        if group is None:
            return sum(self._live.values())
        return self._live.get(group, 0)

    def invalid_trials(self, group: int | None = None) -> int:
        """Trials that exited with invalid hyperparameters (in ``group``, or in all)."""
        if group is None:
            return sum(self._invalid.values())
        return self._invalid.get(group, 0)

    def _set_progress(self, request_id: str, fraction: float) -> None:
        if math.isfinite(fraction):
            self._trials[request_id].progress = min(max(fraction, 0.0), 1.0)

    # -- the interface -------------------------------------------------------------------------

    def _trial(self, request_id: str) -> _Trial:
        trial = self._trials.get(request_id)
        if trial is None:
            raise SearcherStateError(f"{self.name}: no trial with request id {request_id!r}")
        return trial

    def _record(self, actions: list[Action]) -> list[Action]:
        for action in actions:
            if isinstance(action, Stop):
                self._trials[action.request_id].stopped = True
        return actions

    def initial_actions(self) -> list[Action]:
        if self._started:
            raise SearcherStateError(f"{self.name}: initial_actions() was already called")
        self._started = True
        actions = self._record(self._initial())
        if not self._trials:
            self._shut = True
            actions.append(Shutdown())
        return actions

    def on_validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        trial = self._trial(request_id)
        if self._shut or not trial.live or trial.stopped:
            return []
        return self._record(self._validation(request_id, metrics))

    def on_trial_progress(self, request_id: str, progress: float) -> None:
        if self._trial(request_id).live:
            self._set_progress(request_id, progress)

    def on_trial_exited(self, request_id: str) -> list[Action]:
        return self._exit(request_id, None)

    def on_trial_exited_early(self, request_id: str, reason: ExitedReason) -> list[Action]:
        return self._exit(request_id, ExitedReason(reason))

    def _exit(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        trial = self._trial(request_id)
        if not trial.live or self._shut:
            return []
        trial.live = False
        trial.reason = reason
        self._live[trial.group] -= 1
        if reason is not None and reason.invalid_hp:
            self._invalid[trial.group] = self._invalid.get(trial.group, 0) + 1
        actions = self._record(self._exited(request_id, reason))
        if self.live_trials() == 0:
            total = len(self._trials)
            reasons = [t.reason for t in self._trials.values()]
            self._shut = True
            actions.append(
                Shutdown(
                    cancel=reasons.count(ExitedReason.USER_CANCELED) >= total,
                    failure=reasons.count(ExitedReason.ERRORED) >= total,
                )
            )
        return actions

    def progress(self) -> float:
        if self._shut:
            return 1.0
        done = sum(
            t.progress if t.live else 1.0
            for t in self._trials.values()
            if not (self.replaces_invalid and t.reason is not None and t.reason.invalid_hp)
        )
        return min(max(done / max(self._planned_trials(), 1), 0.0), 1.0)

    def snapshot(self) -> dict[str, Any]:
        return {
            "searcher": self.name,
            "version": SNAPSHOT_VERSION,
            "rng": self._rng.state(),
            "started": self._started,
            "shutdown": self._shut,
            "trials": [[rid, *t.to_list()] for rid, t in self._trials.items()],
            "method": self._state(),
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        if snapshot.get("searcher") != self.name or snapshot.get("version") != SNAPSHOT_VERSION:
            raise SearcherStateError(
                f"cannot restore a {snapshot.get('searcher')!r} searcher snapshot "
                f"(version {snapshot.get('version')!r}) into {self.name!r} "
                f"(version {SNAPSHOT_VERSION})"
            )
        try:
            self._rng = SearchRandom.from_state(snapshot["rng"])
            self._started = bool(snapshot["started"])
            self._shut = bool(snapshot["shutdown"])
            self._trials = {row[0]: _Trial.from_list(row[1:]) for row in snapshot["trials"]}
            self._live, self._invalid = {}, {}
            for trial in self._trials.values():
                self._live[trial.group] = self._live.get(trial.group, 0) + trial.live
                invalid = trial.reason is not None and trial.reason.invalid_hp
                self._invalid[trial.group] = self._invalid.get(trial.group, 0) + invalid
            self._load(snapshot["method"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SearcherStateError(f"{self.name}: malformed searcher snapshot: {exc}") from exc
