"""Replaying a live Determined search into a fresh Stalwart searcher.

Determined keeps its searcher's state in its own format; Stalwart does not read it. Instead, a
live experiment's search is replayed: a new Stalwart searcher is built from the imported config
(same experiment seed) and fed what happened on Determined, so that its snapshot reflects the
search so far and ``det e activate`` goes on from there.

- Each ``Create`` the searcher returns is bound, in order, to the next imported trial in
  Determined's creation order (trial id). The imported trial keeps Determined's hyperparameters
  and takes the ``Create``'s request id (that id names it in every later searcher call). A grid
  search binds only a trial that ran the ``Create``'s grid point (else the points left to run
  would not be the ones Determined left).
- The trials' validations (the searcher config's metric, in Determined's report order; the time
  metric ``batches`` is the report's ``total_batches`` when the report lacks it) and the exits
  of ended trials (COMPLETED: exited; ERROR: errored; CANCELED: user-canceled) are fed in time
  order. A trial's events wait until it is bound.
- ``Stop`` of a trial that has ended is a no-op; ``Stop`` of a trial that was still running on
  Determined makes it end (it is imported COMPLETED, as a trial the searcher stops completes,
  and its exit is fed).
- ``Create`` actions beyond the imported trials are returned (:attr:`Replay.creates`): the
  importer creates them PAUSED with the searcher's hyperparameters, as the master does for a
  paused experiment.

:class:`ReplayError` says why a search cannot be replayed (a searcher kind that is not
supported, more imported trials than the searcher creates, a grid point out of place, a
search that is over, a validation without the searcher metric); the importer then imports the
experiment CANCELED with that reason.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stalwart.config import ExperimentConfig
from stalwart.config.searcher import AdaptiveASHASearcher, AsyncHalvingSearcher
from stalwart.master.searcher.actions import Action, Create, Shutdown, Stop
from stalwart.master.searcher.base import ExitedReason, SearcherMetricError, SearchMethod
from stalwart.master.searcher.factory import make_searcher, time_budget

__all__ = [
    "REPLAYED",
    "REPLAYED_KEY",
    "Replay",
    "ReplayError",
    "ReplayTrial",
    "Validation",
    "replay",
]

REPLAYED = frozenset({"single", "random", "grid", "async_halving", "adaptive_asha"})
"""The searchers whose live searches are replayed."""

REPLAYED_KEY = "replayed"
"""Set in ``searcher_state`` by the importer until the master first drives the searcher: the
metrics step then moves its cursor past the reports the replay fed (they are imported after
the experiment)."""

_EXITS = {"COMPLETED": None, "ERROR": ExitedReason.ERRORED, "CANCELED": ExitedReason.USER_CANCELED}
"""Imported (ended) trial states and the exit each is fed as (None: a normal exit)."""


class ReplayError(Exception):
    """The search cannot be replayed (the message says why, for the experiment's note)."""


@dataclass(frozen=True)
class Validation:
    """One validation report of a Determined trial."""

    trial_id: int
    time: dt.datetime
    report_id: int
    total_batches: int
    metrics: Mapping[str, Any]


@dataclass(frozen=True)
class ReplayTrial:
    """An imported trial as the replay sees it: its Determined id, state here (an ended state,
    or PAUSED for a trial that was live), end time and hyperparameters."""

    trial_id: int
    state: str
    end_time: dt.datetime | None
    hparams: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Replay:
    """The replayed searcher and what the importer does with it."""

    snapshot: dict[str, Any]
    requests: dict[int, str] = field(default_factory=dict)
    """Determined trial id -> the request id of the ``Create`` it was bound to."""
    stopped: set[int] = field(default_factory=set)
    """Live Determined trials the searcher stopped (imported COMPLETED)."""
    creates: list[Create] = field(default_factory=list)
    """Trials the searcher created beyond the imported ones (created PAUSED at import)."""


def _feed(searcher: SearchMethod, request_id: str, reason: ExitedReason | None) -> list[Action]:
    if reason is None:
        return searcher.on_trial_exited(request_id)
    return searcher.on_trial_exited_early(request_id, reason)


def replay(
    config: ExperimentConfig, trials: Sequence[ReplayTrial], validations: Sequence[Validation]
) -> Replay:
    """Replay the search (``trials`` in Determined's creation order); raises ReplayError."""
    name = config.searcher.name
    if name not in REPLAYED:
        raise ReplayError(f"the {name} searcher is not replayed")
    searcher = make_searcher(config)
    time_metric = None
    if isinstance(config.searcher, AsyncHalvingSearcher | AdaptiveASHASearcher):
        time_metric = time_budget(config.searcher)[0]
    result = Replay(snapshot={})
    unbound = list(trials)
    by_request: dict[str, ReplayTrial] = {}
    waiting: dict[int, list[tuple[str, Any]]] = {t.trial_id: [] for t in trials}
    exited: set[int] = set()
    over = False

    def carry_out(actions: list[Action]) -> None:
        nonlocal over
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            if isinstance(action, Create):
                if not unbound:
                    result.creates.append(action)
                    continue
                trial = unbound.pop(0)
                if name == "grid" and dict(trial.hparams) != action.hparams:
                    raise ReplayError(
                        f"trial {trial.trial_id} ran another grid point than Stalwart's grid "
                        "search would have at that place"
                    )
                result.requests[trial.trial_id] = action.request_id
                by_request[action.request_id] = trial
                for event in waiting.pop(trial.trial_id):
                    queue.extend(event_actions(trial, event))
            elif isinstance(action, Stop):
                trial = by_request[action.request_id]
                if trial.state == "PAUSED" and trial.trial_id not in exited:
                    result.stopped.add(trial.trial_id)
                    exited.add(trial.trial_id)
                    queue.extend(searcher.on_trial_exited(action.request_id))
            elif isinstance(action, Shutdown):
                over = True

    def event_actions(trial: ReplayTrial, event: tuple[str, Any]) -> list[Action]:
        request_id = result.requests[trial.trial_id]
        kind, value = event
        if kind == "exit":
            if trial.trial_id in exited:
                return []
            exited.add(trial.trial_id)
            return _feed(searcher, request_id, value)
        report: Validation = value
        metrics = dict(report.metrics)
        if time_metric == "batches" and "batches" not in metrics:
            metrics["batches"] = report.total_batches
        try:
            return searcher.on_validation(request_id, metrics)
        except SearcherMetricError as exc:
            raise ReplayError(f"trial {trial.trial_id}'s validation: {exc}") from None

    trial_of = {t.trial_id: t for t in trials}
    events: list[tuple[dt.datetime, int, int, ReplayTrial, tuple[str, Any]]] = [
        (v.time, 0, v.report_id, trial_of[v.trial_id], ("validation", v))
        for v in validations
        if v.trial_id in trial_of
    ]
    for trial in trials:
        if trial.state in _EXITS:
            when = trial.end_time or dt.datetime.max.replace(tzinfo=dt.UTC)
            events.append((when, 1, trial.trial_id, trial, ("exit", _EXITS[trial.state])))
    carry_out(searcher.initial_actions())
    for _, _, _, trial, event in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        if trial.trial_id in result.requests:
            carry_out(event_actions(trial, event))
        else:
            waiting[trial.trial_id].append(event)
    if unbound:
        raise ReplayError(
            f"Stalwart's {name} searcher creates fewer trials than the {len(trials)} imported"
        )
    if over:
        raise ReplayError(f"Stalwart's {name} searcher, replayed, has nothing left to run")
    result.snapshot = searcher.snapshot()
    return result
