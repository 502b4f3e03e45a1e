"""Replay traces recorded from the version-1 searchers against the current ones, step by step.

``fixtures/traces_v1.json.gz`` holds event sequences and, after every event, what the version-1
searchers (snapshot version 1, before issue 25) answered: their actions (request ids replaced by
creation numbers), the name of the error they raised, their ``progress()`` and their numbers of
live and invalid-hyperparameter trials; its ``about`` field describes the format. A current
searcher fed the same events must give the same answers (progress to rounding: the current
searchers add exited trials as one count), with its snapshot round-tripped through JSON where the
trace says so, as the master does every round.

Trials are named by creation number: an event for "trial 3" reaches the searcher under the id it
gave trial 3 (or, after a version-1 restore, the id in the snapshot).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from stalwart.errors import StalwartError
from stalwart.master.searcher import (
    Create,
    ExitedReason,
    SearchMethod,
    Shutdown,
    SingleSearch,
    Stop,
)
from stalwart.master.searcher.base import TrackedSearch, request_id_number

TRACES = Path(__file__).parent / "fixtures" / "traces_v1.json.gz"


@cache
def traces() -> dict[str, Any]:
    """The recorded traces (see the file's ``about``)."""
    loaded: dict[str, Any] = json.loads(gzip.decompress(TRACES.read_bytes()))
    return loaded


def _number(value: Any) -> Any:
    """Progress values: non-finite ones are recorded as strings."""
    return float(value) if isinstance(value, str) else value


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """``("ok", actions)``, or the name of the error raised."""
    try:
        return "ok", call()
    except StalwartError as exc:
        return type(exc).__name__, None


@dataclass
class Replay:
    """Feeds ``searcher`` the events of one recorded trace and checks its answers."""

    searcher: SearchMethod
    max_concurrent_trials: int
    restore: Callable[[dict[str, Any]], SearchMethod]
    """Rebuilds the searcher from a snapshot (the master does it every round)."""
    counter_ids: bool = True
    """Whether the searcher makes counter ids (False after a version-1 restore)."""
    ids: list[str] = field(default_factory=list)
    steps: int = 0
    largest_snapshot: int = 0

    def play(self, steps: list[list[Any]], name: str) -> None:
        for index, (event, answer, state) in enumerate(steps):
            self.steps += 1
            self.step(event, answer, state, f"{name} step {index}: {event}")

    def step(self, event: list[Any], answer: Any, state: Any, what: str) -> None:
        kind = event[0]
        new = self.searcher
        if kind == "round_trip":
            self.round_trip()
            return
        if kind == "restored":
            pass
        elif kind == "progress":
            new.on_trial_progress(self.ids[event[1]], _number(event[2]))
        elif kind == "continue":
            assert isinstance(new, SingleSearch)
            new.continue_trial(self.ids[0])
        else:
            call: Callable[[], Any]
            if kind == "initial":
                call = new.initial_actions
            elif kind == "validation":
                call = lambda: new.on_validation(self.ids[event[1]], event[2])  # noqa: E731
            elif kind == "exit":
                call = lambda: new.on_trial_exited(self.ids[event[1]])  # noqa: E731
            elif kind == "early_exit":
                reason = ExitedReason(event[2])
                call = lambda: new.on_trial_exited_early(self.ids[event[1]], reason)  # noqa: E731
            elif kind == "unknown":
                call = lambda: new.on_trial_exited(event[1])  # noqa: E731
            elif kind == "foreign":  # a well-formed id of another search
                first = self.ids[0]
                foreign = first[:-1] + ("0" if first[-1] != "0" else "1")
                call = lambda: new.on_trial_exited(foreign)  # noqa: E731
            else:
                raise AssertionError(f"unknown event {event!r}")
            self._check_answer(_outcome(call), answer, what)
        self._check_state(state, what)

    def _check_answer(self, outcome: tuple[str, Any], answer: Any, what: str) -> None:
        if isinstance(answer, str):
            assert outcome[0] == answer, f"{what}: {outcome[0]}, recorded {answer}"
            return
        assert outcome[0] == "ok", f"{what}: raised {outcome[0]}, recorded {answer}"
        numbers = {rid: i for i, rid in enumerate(self.ids)}
        got: list[Any] = []
        for action in outcome[1] or []:
            if isinstance(action, Create):
                number = len(self.ids)
                if self.counter_ids:
                    assert isinstance(self.searcher, TrackedSearch)
                    key = self.searcher.snapshot()["id_key"]
                    assert request_id_number(key, action.request_id) == number, what
                assert action.request_id not in numbers, what
                self.ids.append(action.request_id)
                numbers[action.request_id] = number
                got.append(["create", number, action.hparams, action.trial_seed])
            elif isinstance(action, Stop):
                got.append(["stop", numbers[action.request_id]])
            elif isinstance(action, Shutdown):
                got.append(["shutdown", action.cancel, action.failure])
            else:
                raise AssertionError(f"{what}: not an action: {action!r}")
        got = json.loads(json.dumps(got))
        assert got == answer, f"{what}: actions {got}, recorded {answer}"

    def _check_state(self, state: list[Any], what: str) -> None:
        progress, live, invalid = state
        new_p = self.searcher.progress()
        assert math.isclose(new_p, progress, rel_tol=1e-12, abs_tol=1e-12), (what, new_p, progress)
        assert isinstance(self.searcher, TrackedSearch)
        assert self.searcher.live_trials() == live, what
        assert self.searcher.invalid_trials() == invalid, what
        cap = self.searcher.max_concurrent_trials
        assert cap == self.max_concurrent_trials, what
        assert not cap or live <= cap, what

    def round_trip(self) -> None:
        """Snapshot the searcher through JSON and continue with a restored copy."""
        text = json.dumps(self.searcher.snapshot(), allow_nan=False)
        self.largest_snapshot = max(self.largest_snapshot, len(text))
        restored = self.restore(json.loads(text))
        assert restored.snapshot() == json.loads(text)
        self.searcher = restored
