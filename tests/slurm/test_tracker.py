"""The tracker: one squeue (and at most one sacct) per poll, whatever the number of jobs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.runner import CommandResult, ReplayRunner
from stalwart.hpc.slurm.client import SlurmClient
from stalwart.hpc.slurm.tracker import SlurmTracker
from stalwart.hpc.states import Outcome
from tests.slurm.conftest import fixture_text


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def squeue_sequence(runner: ReplayRunner, *names: str) -> None:
    """squeue answers with these captured outputs in turn (the last one repeats)."""
    outputs = [fixture_text(name) for name in names]

    def answer(argv: Sequence[str]) -> CommandResult:
        text = outputs.pop(0) if len(outputs) > 1 else outputs[0]
        return CommandResult(tuple(argv), 0, text, "")

    runner.answers["squeue"] = answer


def make(runner: ReplayRunner, clock: Clock | None = None) -> SlurmTracker:
    client = SlurmClient(runner, user="root", accounting="jobcomp")
    return SlurmTracker(client, min_interval=1.0, clock=clock or Clock())


def test_first_poll_reports_every_job_then_only_changes(captured_jobs: dict[str, str]) -> None:
    runner = ReplayRunner()
    squeue_sequence(runner, "squeue_mixed.stdout", "squeue_after_cancel.stdout")
    runner.reply("sacct", fixture_text("sacct_completion.stdout"))
    clock = Clock()
    tracker = make(runner, clock)
    roles = ["completed", "failed", "running", "pending", "held", "dependency"]
    for role in roles:
        tracker.track(captured_jobs[role], role)

    first = {u.key: u for u in tracker.poll()}
    assert set(first) == set(roles)
    assert first["completed"].status.outcome is Outcome.SUCCEEDED
    assert first["failed"].status.reason == "failed: exited with code 3"  # from sacct
    assert first["running"].status.allocation_state == "RUNNING"
    assert first["held"].status.stuck
    assert (runner.count("squeue"), runner.count("sacct")) == (1, 1)
    assert sorted(tracker.job_ids) == sorted(captured_jobs[r] for r in roles[2:])

    clock.now += 1.0
    second = {u.key: u for u in tracker.poll()}
    assert second["running"].status.outcome is Outcome.CANCELED
    assert second["running"].previous is not None
    assert second["running"].previous.allocation_state == "RUNNING"
    assert second["dependency"].status.reason.endswith("can never be satisfied")
    assert "held" not in second  # unchanged
    assert (runner.count("squeue"), runner.count("sacct")) == (2, 2)


def test_polls_closer_than_min_interval_run_nothing(captured_jobs: dict[str, str]) -> None:
    runner = ReplayRunner()
    runner.reply("squeue", fixture_text("squeue_mixed.stdout"))
    clock = Clock()
    tracker = make(runner, clock)
    tracker.track(captured_jobs["running"], "r")
    assert tracker.poll()
    clock.now += 0.5
    assert tracker.poll() == []
    assert runner.count("squeue") == 1
    assert tracker.poll(force=True) == []  # forced, but nothing changed
    assert runner.count("squeue") == 2
    assert runner.count("sacct") == 0  # nothing ended: no sacct at all


def test_five_hundred_jobs_cost_two_commands_per_poll() -> None:
    lines = [
        f"{i}|{'RUNNING' if i % 2 else 'PENDING'}|None|0|debug|1|vm|t|t|UNLIMITED|stalwart-a{i}"
        for i in range(1000, 1500)
    ]
    runner = ReplayRunner()
    runner.reply("squeue", "\n".join(lines) + "\n")
    runner.reply("sacct", "")
    tracker = make(runner)
    for i in range(1000, 1600):  # 100 of them are gone from squeue
        tracker.track(str(i), f"a{i}")
    updates = tracker.poll()
    assert len(updates) == 500
    assert (runner.count("squeue"), runner.count("sacct")) == (1, 1)
    sacct = next(call for call in runner.calls if call[0] == "sacct")
    assert "--completion" in sacct
    ids = next(arg for arg in sacct if arg.startswith("--jobs=")).removeprefix("--jobs=")
    assert ids.split(",") == [str(i) for i in range(1500, 1600)]


def test_job_unknown_everywhere_is_lost_after_a_few_polls() -> None:
    runner = ReplayRunner()
    runner.reply("squeue", "")
    runner.reply("sacct", "")
    tracker = make(runner)
    tracker.track("77", "gone")
    assert tracker.poll(force=True) == []
    assert tracker.poll(force=True) == []
    [update] = tracker.poll(force=True)
    assert update.status.terminal
    assert update.status.outcome is Outcome.NODE_FAILED
    assert "no longer knows" in update.status.reason
    assert tracker.job_ids == []


def test_job_purged_from_squeue_is_read_from_accounting(captured_jobs: dict[str, str]) -> None:
    runner = ReplayRunner()
    runner.reply("squeue", "")
    runner.reply("sacct", fixture_text("sacct_completion.stdout"))
    tracker = make(runner)
    tracker.track(captured_jobs["timeout"], "t")
    tracker.track(captured_jobs["preempted"], "p")
    updates = {u.key: u for u in tracker.poll()}
    assert updates["t"].status.outcome is Outcome.TIMED_OUT
    assert updates["p"].status.outcome is Outcome.CANCELED  # its last record, not PREEMPTED


def test_requeue_is_reported_as_a_restart(captured_jobs: dict[str, str]) -> None:
    runner = ReplayRunner()
    squeue_sequence(runner, "squeue_preempt_00_running.stdout", "squeue_requeued_running.stdout")
    tracker = make(runner)
    tracker.track(captured_jobs["preempted"], "p")
    [first] = tracker.poll(force=True)
    assert (first.status.allocation_state, first.restarts) == ("RUNNING", 0)
    [second] = tracker.poll(force=True)
    assert (second.status.allocation_state, second.restarts) == ("RUNNING", 1)


def test_a_failing_squeue_changes_nothing(captured_jobs: dict[str, str]) -> None:
    runner = ReplayRunner()
    runner.reply("squeue", "", "squeue: error: Unable to contact slurm controller", 1)
    tracker = make(runner)
    tracker.track(captured_jobs["running"], "r")
    with pytest.raises(HpcCommandError) as caught:
        tracker.poll(force=True)
    assert caught.value.retryable
    runner.reply("squeue", fixture_text("squeue_mixed.stdout"))
    assert len(tracker.poll(force=True)) == 1


def test_no_jobs_no_commands() -> None:
    runner = ReplayRunner()
    tracker = make(runner)
    assert tracker.poll(force=True) == []
    assert runner.calls == []
    tracker.track("1", "a")
    tracker.forget("1")
    tracker.forget("never-tracked")
    assert tracker.poll(force=True) == []


def test_unknown_states_keep_the_last_known_status() -> None:
    runner = ReplayRunner()
    runner.reply("squeue", "5|RUNNING|None|0|debug|1|vm|t|t|UNLIMITED|stalwart-a\n")
    tracker = make(runner)
    tracker.track("5", "a")
    assert len(tracker.poll(force=True)) == 1
    runner.reply("squeue", "5|NEW_STATE|None|0|debug|1|vm|t|t|UNLIMITED|stalwart-a\n")
    assert tracker.poll(force=True) == []
    runner.reply("squeue", "5|RUNNING|None|0|debug|1|vm|t|t|UNLIMITED|stalwart-a\n")
    assert tracker.poll(force=True) == []  # still RUNNING: no news
    assert tracker.job_ids == ["5"]
