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
- Request ids the search never made raise :class:`SearcherStateError` (a master bug, not a
  user error); ids of trials that exited, however long ago, are ignored as above. (A search
  restored from a version-1 snapshot cannot tell the two apart and ignores both; see
  :class:`TrackedSearch`.)
- A searcher never has more than :attr:`SearchMethod.max_concurrent_trials` trials created and
  not exited (0: no limit), plus :attr:`SearchMethod.ahead` trials created ahead when the
  master allowed it (:meth:`SearchMethod.allow_ahead`: random and grid searches, whose next
  trial never depends on results; the master then runs at most ``max_concurrent_trials`` of
  them at once and queues the others behind running trials). Replacements are created when a
  trial exits, never before, beyond those.
- Exactly one :class:`~stalwart.master.searcher.actions.Shutdown`, returned with the exit of the
  last trial once nothing more will be created; after it every call returns ``[]``.
- ``snapshot()`` is JSON-ready (no NaN/infinity); ``restore(snapshot)`` on a searcher made from
  the same experiment config continues exactly where the snapshot was taken, random draws
  included. The master snapshots and restores every round, so a snapshot holds what the search
  still needs, not its history: it grows with the live trials, not with every trial created
  (issue 25; ASHA's rungs are the one exception, see :mod:`~stalwart.master.searcher.asha`).
  ``restore`` also reads the previous snapshot version (see :data:`SNAPSHOT_VERSION`).

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
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.errors import InvalidArgumentError, StalwartError
from stalwart.master.searcher.actions import Action, Create, Shutdown, Stop
from stalwart.master.searcher.sampling import SearchRandom

__all__ = [
    "EXITED",
    "SNAPSHOT_VERSION",
    "WORST_METRIC",
    "ExitedReason",
    "SearchMethod",
    "SearcherMetricError",
    "SearcherStateError",
    "TrackedSearch",
    "counter_request_id",
    "read_number",
    "request_id_number",
]

SNAPSHOT_VERSION = 2
"""The snapshot layout :meth:`TrackedSearch.snapshot` writes.

Version 2 (issue 25): ``{"searcher", "version", "rng", "started", "shutdown", "id_key",
"groups": [{"group", "created", "exited": {reason or "EXITED": count}}], "trials": [[request_id,
group, stopped, progress]] (live trials only), "method"}``. Version 1, still read by
:meth:`TrackedSearch.restore` (experiments stored before the upgrade keep running), had a
``trials`` row ``[request_id, group, live, stopped, reason, progress]`` for every trial ever
created and no ``id_key`` nor ``groups``; restoring it folds the exited trials into the counts.
"""

_ID_KEY_SALT = 0x5354414C57415254  # "STALWART": the id key is drawn apart from the samples

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

    ahead: int = 0
    """Trials this search may have created beyond :attr:`max_concurrent_trials`, ahead of the
    exits that make room for them (0 unless :meth:`allow_ahead` gave more). Configuration, not
    state: it is not in the snapshot; the master sets it on every searcher it builds."""

    may_run_ahead: ClassVar[bool] = False
    """Whether trials created ahead are the ones exits would create later (the next trial
    never depends on results): random and grid searches."""

    def allow_ahead(self) -> None:
        """Let the search create up to :attr:`max_concurrent_trials` trials ahead (when it
        :attr:`may_run_ahead` and has a limit; otherwise nothing changes), for the master to
        queue behind its running trials so that a freed slot starts the next trial at once."""
        if self.may_run_ahead:
            self.ahead = self.max_concurrent_trials

    def live_limit(self) -> int:
        """Most trials created and not exited: :attr:`max_concurrent_trials` plus
        :attr:`ahead` (0: no limit)."""
        cap = self.max_concurrent_trials
        return cap + self.ahead if cap else 0

    @abstractmethod
    def initial_actions(self) -> list[Action]:
        """The first trials to create. Call once, on a new searcher."""

    @abstractmethod
    def on_validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        """A trial reported validation metrics (its ``avgMetrics``). May raise
        :class:`SearcherMetricError` (see the module docstring)."""

    @classmethod
    def reacts_to_validations(cls) -> bool:
        """Whether a validation can make this kind of searcher act (or raise) before the
        trial exits: if not, a validation need not wake the cluster loop (the searcher is fed
        it at its next drive all the same). True unless a subclass knows better."""
        return True

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


_M64 = (1 << 64) - 1
_ID_COUNTER_BITS = 62
"""A counter request id keeps the trial's number in the low 62 bits of its UUID."""

EXITED = "EXITED"
"""The exit-count key of a normal exit (exited 0, or stopped); early exits count under their
:class:`ExitedReason` value."""


def _mix64(x: int) -> int:
    """splitmix64's finalizer: a 64-bit bijection that scatters the bits."""
    x &= _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def counter_request_id(key: int, number: int) -> str:
    """The request id of a search's trial ``number`` (0 for its first ``Create``).

    A version-4 UUID whose low 62 bits are ``number`` and whose high 64 bits are a hash of
    ``key`` (the search's id key) and ``number``: ids of one search are unique and differ between
    searches with different keys, and :func:`request_id_number` recognises them without keeping a
    list of the ids given out (see issue 25).
    """
    if not 0 <= number < 1 << _ID_COUNTER_BITS:
        raise SearcherStateError(f"trial number {number} out of range for a request id")
    tag = _mix64(key ^ _mix64(number + 0x9E3779B97F4A7C15))
    return str(uuid.UUID(int=(tag << 64) | number, version=4))


def request_id_number(key: int, request_id: str) -> int | None:
    """The trial number :func:`counter_request_id` made ``request_id`` from, or None when
    ``request_id`` is not such an id of the search with this ``key``."""
    try:
        value = uuid.UUID(request_id).int
    except (ValueError, TypeError, AttributeError):
        return None
    number = value & ((1 << _ID_COUNTER_BITS) - 1)
    return number if counter_request_id(key, number) == request_id else None


@dataclass
class _Trial:
    """A live trial's row (exited trials only count in their :class:`_Group`)."""

    group: int
    stopped: bool = False
    progress: float = 0.0

    def to_list(self, request_id: str) -> list[Any]:
        return [request_id, self.group, self.stopped, self.progress]

    @classmethod
    def from_list(cls, data: list[Any]) -> tuple[str, _Trial]:
        request_id, group, stopped, progress = data
        return str(request_id), cls(int(group), bool(stopped), float(progress))


@dataclass
class _Group:
    """What a group's trials add up to: created, and exited by reason (:data:`EXITED` for a
    normal exit)."""

    created: int = 0
    exited: dict[str, int] = field(default_factory=dict)

    @property
    def exits(self) -> int:
        return sum(self.exited.values())

    def count(self, key: str) -> int:
        return self.exited.get(key, 0)

    @property
    def invalid(self) -> int:
        return self.count(ExitedReason.INVALID_HP.value) + self.count(
            ExitedReason.INIT_INVALID_HP.value
        )

    def to_dict(self, group: int) -> dict[str, Any]:
        exited = {k: n for k, n in sorted(self.exited.items()) if n}
        return {"group": group, "created": self.created, "exited": exited}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> tuple[int, _Group]:
        exited = {str(k): int(n) for k, n in data["exited"].items()}
        for key in exited:
            if key != EXITED:
                ExitedReason(key)  # ValueError for an unknown reason
        group = cls(int(data["created"]), exited)
        if group.exits > group.created or min(exited.values(), default=0) < 0:
            raise ValueError(f"group {data['group']}: more exits than trials created")
        return int(data["group"]), group


class TrackedSearch(SearchMethod):
    """Shared machinery: trial bookkeeping, liveness, Shutdown, progress, snapshot envelope.

    Subclasses implement the hooks ``_initial``, ``_validation``, ``_exited``, ``_state``,
    ``_load``, ``_planned_trials`` and the ``max_concurrent_trials`` property, and create trials
    only through :meth:`_create`. Trials belong to a group (an ASHA bracket; 0 elsewhere).

    The state grows with the live trials, not with all trials ever created (issue 25): a live
    trial has a row (its group, whether it was stopped, its progress); an exited trial only
    counts, in its group's trials created and exits by reason. That is all ``progress()``,
    ``Shutdown``, the concurrency limits and the replacement of invalid-hyperparameter trials
    need. Request ids are :func:`counter_request_id` ids, so an event for a trial that exited
    long ago (ignored) is still told from one for an id the search never made
    (:class:`SearcherStateError`). A search restored from a version-1 snapshot keeps the random
    request ids it was making: it cannot tell those apart, and ignores both.
    """

    replaces_invalid: ClassVar[bool] = True
    """Whether trials with invalid hyperparameters are replaced (and so not counted in progress)."""

    def __init__(self, hyperparameters: Mapping[str, Hyperparameter], seed: int) -> None:
        self._hps = hyperparameters
        self._rng = SearchRandom(seed)
        self._id_key: int | None = SearchRandom(seed ^ _ID_KEY_SALT).bits64()
        self._trials: dict[str, _Trial] = {}
        self._groups: dict[int, _Group] = {}
        self._started = False
        self._shut = False

    # -- hooks ---------------------------------------------------------------------------------

    @abstractmethod
    def _initial(self) -> list[Action]: ...

    def _validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        """React to a validation of a live, not stopped trial (default: nothing)."""
        return []

    @classmethod
    def reacts_to_validations(cls) -> bool:
        """Only a subclass that overrides :meth:`_validation` does."""
        return cls._validation is not TrackedSearch._validation

    @abstractmethod
    def _exited(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        """React to an exit (``reason`` None: a normal exit). The trial already counts as
        exited; its row (:meth:`_row`) is dropped after this hook returns."""

    @abstractmethod
    def _planned_trials(self) -> int:
        """How many (valid) trials the finished search will have run."""

    def _state(self) -> dict[str, Any]:
        return {}

    def _load(self, state: Mapping[str, Any]) -> None:
        return None

    def _load_v1(self, state: Mapping[str, Any], rows: list[list[Any]]) -> None:
        """Load a version-1 snapshot's method state; ``rows`` are its per-trial rows
        ``[request_id, group, live, stopped, reason, progress]`` (default: :meth:`_load`)."""
        self._load(state)

    # -- helpers for subclasses ----------------------------------------------------------------

    def _create(self, hparams: dict[str, Any], group: int = 0) -> Create:
        limit = self.live_limit()
        if limit and self.live_trials() >= limit:
            raise SearcherStateError(f"{self.name}: would exceed {limit} live trials")
        # Drawn even when unused, so a seed samples the same hyperparameters and trial seeds as
        # before counter ids.
        request_id = self._rng.request_id()
        if self._id_key is not None:
            request_id = counter_request_id(self._id_key, self.created_trials())
        create = Create(request_id=request_id, hparams=hparams, trial_seed=self._rng.trial_seed())
        self._trials[request_id] = _Trial(group)
        self._group(group).created += 1
        return create

    def _group(self, group: int) -> _Group:
        found = self._groups.get(group)
        if found is None:
            found = self._groups[group] = _Group()
        return found

    def _revive(self, request_id: str, group: int, exit_key: str) -> _Trial:
        """Make a trial that exited (counted under ``exit_key``) live again, with a fresh row
        (``SingleSearch.continue_trial``)."""
        counts = self._group(group)
        if counts.count(exit_key) < 1:
            raise SearcherStateError(f"{self.name}: no exit {exit_key!r} to take back")
        counts.exited[exit_key] -= 1
        if not counts.exited[exit_key]:
            del counts.exited[exit_key]
        trial = self._trials[request_id] = _Trial(group)
        return trial

    def _row(self, request_id: str) -> _Trial:
        """The row of a live trial (KeyError otherwise)."""
        return self._trials[request_id]

    def created_trials(self, group: int | None = None) -> int:
        """Trials created (in ``group``, or in all)."""
        if group is None:
            return sum(g.created for g in self._groups.values())
        return self._groups[group].created if group in self._groups else 0

    def live_trials(self, group: int | None = None) -> int:
        """Trials created and not exited (in ``group``, or in all)."""
        if group is None:
            return sum(g.created - g.exits for g in self._groups.values())
        found = self._groups.get(group)
        return 0 if found is None else found.created - found.exits

    def invalid_trials(self, group: int | None = None) -> int:
        """Trials that exited with invalid hyperparameters (in ``group``, or in all)."""
        if group is None:
            return sum(g.invalid for g in self._groups.values())
        return self._groups[group].invalid if group in self._groups else 0

    def _set_progress(self, request_id: str, fraction: float) -> None:
        if math.isfinite(fraction):
            self._trials[request_id].progress = min(max(fraction, 0.0), 1.0)

    # -- the interface -------------------------------------------------------------------------

    def _made(self, request_id: str) -> bool:
        """Whether this search made ``request_id`` (always True with version-1 random ids)."""
        if self._id_key is None:
            return True
        number = request_id_number(self._id_key, request_id)
        return number is not None and number < self.created_trials()

    def _trial(self, request_id: str) -> _Trial | None:
        """The live trial's row; None for a trial that exited; SearcherStateError for an id the
        search never made."""
        trial = self._trials.get(request_id)
        if trial is None and not self._made(request_id):
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
        if not self.created_trials():
            self._shut = True
            actions.append(Shutdown())
        return actions

    def on_validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        trial = self._trial(request_id)
        if self._shut or trial is None or trial.stopped:
            return []
        return self._record(self._validation(request_id, metrics))

    def on_trial_progress(self, request_id: str, progress: float) -> None:
        if self._trial(request_id) is not None:
            self._set_progress(request_id, progress)

    def on_trial_exited(self, request_id: str) -> list[Action]:
        return self._exit(request_id, None)

    def on_trial_exited_early(self, request_id: str, reason: ExitedReason) -> list[Action]:
        return self._exit(request_id, ExitedReason(reason))

    def _exit(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        trial = self._trial(request_id)
        if trial is None or self._shut:
            return []
        group = self._group(trial.group)
        key = EXITED if reason is None else reason.value
        group.exited[key] = group.count(key) + 1
        actions = self._record(self._exited(request_id, reason))
        del self._trials[request_id]
        if self.live_trials() == 0:
            total = self.created_trials()
            canceled = sum(g.count(ExitedReason.USER_CANCELED.value) for g in self._groups.values())
            errored = sum(g.count(ExitedReason.ERRORED.value) for g in self._groups.values())
            self._shut = True
            actions.append(Shutdown(cancel=canceled >= total, failure=errored >= total))
        return actions

    def progress(self) -> float:
        if self._shut:
            return 1.0
        exited = sum(
            g.exits - (g.invalid if self.replaces_invalid else 0) for g in self._groups.values()
        )
        done = math.fsum([float(exited), *(t.progress for t in self._trials.values())])
        return min(max(done / max(self._planned_trials(), 1), 0.0), 1.0)

    def snapshot(self) -> dict[str, Any]:
        return {
            "searcher": self.name,
            "version": SNAPSHOT_VERSION,
            "rng": self._rng.state(),
            "started": self._started,
            "shutdown": self._shut,
            "id_key": self._id_key,
            "groups": [g.to_dict(n) for n, g in sorted(self._groups.items())],
            "trials": [t.to_list(rid) for rid, t in self._trials.items()],
            "method": self._state(),
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        version = snapshot.get("version")
        if snapshot.get("searcher") != self.name or version not in (1, SNAPSHOT_VERSION):
            raise SearcherStateError(
                f"cannot restore a {snapshot.get('searcher')!r} searcher snapshot "
                f"(version {snapshot.get('version')!r}) into {self.name!r} "
                f"(versions 1 and {SNAPSHOT_VERSION})"
            )
        try:
            self._rng = SearchRandom.from_state(snapshot["rng"])
            self._started = bool(snapshot["started"])
            self._shut = bool(snapshot["shutdown"])
            if version == 1:
                self._restore_v1(snapshot)
                return
            key = snapshot["id_key"]
            if key is not None and not (isinstance(key, int) and 0 <= key <= _M64):
                raise ValueError(f"id_key {key!r} is no 64-bit unsigned integer")
            self._id_key = key
            self._groups = dict(_Group.from_dict(g) for g in snapshot["groups"])
            self._trials = dict(_Trial.from_list(row) for row in snapshot["trials"])
            self._check_rows()
            self._load(snapshot["method"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SearcherStateError(f"{self.name}: malformed searcher snapshot: {exc}") from exc

    def _restore_v1(self, snapshot: Mapping[str, Any]) -> None:
        """A version-1 snapshot (a row per trial ever created): fold the exited trials into
        their group's counts; the search goes on making random request ids."""
        rows = [list(row) for row in snapshot["trials"]]
        self._id_key = None
        self._groups, self._trials = {}, {}
        for request_id, group, live, stopped, reason, progress in rows:
            counts = self._group(int(group))
            counts.created += 1
            if live:
                self._trials[str(request_id)] = _Trial(int(group), bool(stopped), float(progress))
            else:
                key = EXITED if reason is None else ExitedReason(reason).value
                counts.exited[key] = counts.count(key) + 1
        self._load_v1(snapshot["method"], rows)

    def _check_rows(self) -> None:
        for group, counts in self._groups.items():
            rows = sum(1 for t in self._trials.values() if t.group == group)
            if rows != counts.created - counts.exits:
                raise ValueError(
                    f"group {group}: {rows} live trial rows, but {counts.created} created and "
                    f"{counts.exits} exited"
                )
        if any(t.group not in self._groups for t in self._trials.values()):
            raise ValueError("a live trial's group has no counts")
