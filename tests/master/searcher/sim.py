"""A pure simulation harness for searchers: fake trials that train, validate, fail and exit.

Each live trial advances ``period`` units of the time metric per step and reports a validation
``{metric: objective(hparams, time), time_metric: time}``. A trial exits (``on_trial_exited``) at
its next step once it was stopped or has trained ``length`` units. ``early_exit`` may end a trial
early instead (errored, canceled, invalid hyperparameters). Which live trial steps next is drawn
from a seeded :class:`random.Random`, so runs are deterministic and interleavings vary with the
seed. Every event and the actions it produced are recorded, so a run can be replayed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stalwart.config import ExperimentConfig
from stalwart.master.searcher import (
    Action,
    Create,
    ExitedReason,
    SearchMethod,
    Shutdown,
    Stop,
    make_searcher,
)

Objective = Callable[[Mapping[str, Any], float], float]
EarlyExit = Callable[["SimTrial", random.Random], ExitedReason | None]


def make_config(
    searcher: dict[str, Any], hyperparameters: dict[str, Any], seed: int = 1
) -> ExperimentConfig:
    """A validated experiment config with the given searcher and hyperparameters."""
    return ExperimentConfig.model_validate(
        {
            "entrypoint": "python3 train.py",
            "searcher": searcher,
            "hyperparameters": hyperparameters,
            "reproducibility": {"experiment_seed": seed},
        }
    )


@dataclass
class SimTrial:
    create: Create
    time: float = 0.0
    stop_requested: bool = False
    exited: bool = False
    exit_reason: ExitedReason | None = None
    best_time: float = 0.0

    @property
    def request_id(self) -> str:
        return self.create.request_id


@dataclass
class Event:
    kind: str  # "validation", "exited", "exited_early"
    request_id: str
    payload: Any = None


@dataclass
class Simulation:
    searcher: SearchMethod
    objective: Objective
    metric: str = "loss"
    time_metric: str = "batches"
    period: float = 1.0
    length: float = 16.0
    seed: int = 0
    early_exit: EarlyExit | None = None
    max_events: int = 100_000
    trials: dict[str, SimTrial] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    log: list[tuple[Event, list[Action]]] = field(default_factory=list)
    shutdowns: list[Shutdown] = field(default_factory=list)
    max_live: int = 0
    progress: list[float] = field(default_factory=list)
    initial: list[Action] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def live(self) -> list[SimTrial]:
        return [t for t in self.trials.values() if not t.exited]

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            self.actions.append(action)
            if isinstance(action, Create):
                assert action.request_id not in self.trials, "request ids must be unique"
                assert 0 <= action.trial_seed < 2**31
                json.dumps(action.hparams, allow_nan=False)
                self.trials[action.request_id] = SimTrial(action)
            elif isinstance(action, Stop):
                self.trials[action.request_id].stop_requested = True
            else:
                self.shutdowns.append(action)
        cap = self.searcher.live_limit()  # max_concurrent_trials, plus any ahead
        live = len(self.live)
        self.max_live = max(self.max_live, live)
        assert not cap or live <= cap, f"{live} live trials, limit {cap}"
        p = self.searcher.progress()
        assert 0.0 <= p <= 1.0
        self.progress.append(p)

    def _event(self, event: Event) -> None:
        if event.kind == "validation":
            actions = self.searcher.on_validation(event.request_id, event.payload)
        elif event.kind == "exited":
            actions = self.searcher.on_trial_exited(event.request_id)
        else:
            actions = self.searcher.on_trial_exited_early(event.request_id, event.payload)
        self.log.append((event, list(actions)))
        self._apply(actions)

    def start(self) -> None:
        self.initial = self.searcher.initial_actions()
        self._apply(self.initial)

    def step(self) -> bool:
        """Advance one live trial; False when nothing is live."""
        live = self.live
        if not live:
            return False
        trial = live[self._rng.randrange(len(live))]
        if trial.stop_requested or trial.time >= self.length:
            trial.exited = True
            self._event(Event("exited", trial.request_id))
            return True
        reason = self.early_exit(trial, self._rng) if self.early_exit else None
        if reason is not None:
            trial.exited = True
            trial.exit_reason = reason
            self._event(Event("exited_early", trial.request_id, reason))
            return True
        trial.time = min(trial.time + self.period, self.length)
        value = self.objective(trial.create.hparams, trial.time)
        metrics = {self.metric: value, self.time_metric: trial.time, "extra": 1}
        self._event(Event("validation", trial.request_id, metrics))
        return True

    def run(self) -> Simulation:
        self.start()
        for _ in range(self.max_events):
            if not self.step():
                break
        else:
            raise AssertionError("the simulation did not finish")
        assert len(self.shutdowns) == 1, self.shutdowns
        assert isinstance(self.actions[-1], Shutdown)
        assert self.searcher.progress() == 1.0
        return self

    @property
    def creates(self) -> list[Create]:
        return [a for a in self.actions if isinstance(a, Create)]

    @property
    def valid_trials(self) -> list[SimTrial]:
        return [
            t
            for t in self.trials.values()
            if not (t.exit_reason is not None and t.exit_reason.invalid_hp)
        ]

    def units_trained(self) -> float:
        return sum(t.time for t in self.trials.values())


def replay(
    make: Callable[[], SearchMethod],
    log: list[tuple[Event, list[Action]]],
    initial: list[Action],
    cut: int,
) -> list[list[Action]]:
    """Feed ``log`` to a new searcher, snapshot after ``cut`` events (through JSON), restore
    into another new searcher, and return the actions of every event."""
    first = make()
    assert first.initial_actions() == initial
    results: list[list[Action]] = []

    def feed(searcher: SearchMethod, event: Event) -> list[Action]:
        if event.kind == "validation":
            return searcher.on_validation(event.request_id, event.payload)
        if event.kind == "exited":
            return searcher.on_trial_exited(event.request_id)
        return searcher.on_trial_exited_early(event.request_id, event.payload)

    for event, _ in log[:cut]:
        results.append(feed(first, event))
    snapshot = json.loads(json.dumps(first.snapshot(), allow_nan=False))
    second = make()
    second.restore(snapshot)
    assert second.snapshot() == snapshot
    for event, _ in log[cut:]:
        results.append(feed(second, event))
    return results


def config_searcher(config: ExperimentConfig) -> Callable[[], SearchMethod]:
    return lambda: make_searcher(config)
