"""The reconcile step with real processes and a real master for logs and model definitions:
constructed SyncResponses in, SyncRequests out (no HTTP mocking)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.agent.context import fetch_context
from stalwart.agent.daemon import Daemon
from stalwart.agent.protocol import ContainerStatus, SlotInfo, SyncResponse, TaskSpec
from stalwart.agent.runner import ProcessRunner, kill_leftovers
from stalwart.agent.settings import AgentSettings
from stalwart.agent.shipper import LogShipper
from stalwart.agent.workspace import container_dir
from tests.agent.conftest import Master, task_spec, wait_for
from tests.master.test_allocations_api import TrialEnv

SLOTS = [SlotInfo(id="0", device_type="cpu")]
SLEEPER = "import time; print('up', flush=True); time.sleep(60)"
STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: print('no', flush=True))\n"
    "print('up', flush=True)\n"
    "while True: time.sleep(0.05)\n"
)


def agent_settings(master_url: str, home: Path, **extra: object) -> AgentSettings:
    return AgentSettings.model_validate(
        {
            "master_url": master_url,
            "agent_id": "agent-t",
            "token": "agent-token",
            "home": home,
            "addresses": ["127.0.0.1"],
            "log_flush_seconds": 0.05,
            **extra,
        }
    )


def make_daemon(
    settings: AgentSettings,
    http: httpx.Client,
    before_fetch: Callable[[TaskSpec], None] = lambda spec: None,
) -> Daemon:
    """A daemon with a real runner and shipper; ``before_fetch`` runs in the starter thread
    before each model definition is downloaded (a test makes a download slow with it)."""
    shipper = LogShipper(settings.master_url, flush_seconds=0.05, max_backoff_seconds=0.2)

    def fetch(spec: TaskSpec) -> bytes:
        before_fetch(spec)
        return fetch_context(http, settings.master_url, spec.task_id, spec.token)

    shipper.start()
    return Daemon(
        settings,
        SLOTS,
        runner=ProcessRunner(),
        shipper=shipper,
        fetch=fetch,
        base_env=dict(os.environ),
    )


@pytest.fixture
def daemon(master: Master, tmp_path: Path) -> Iterator[Daemon]:
    with httpx.Client() as http:
        agent = make_daemon(agent_settings(master.url, tmp_path / "agent"), http)
        yield agent
        agent.shutdown(kill=True, grace=0.0)
        agent.shipper.close(timeout=2.0)


def status(daemon: Daemon, spec: TaskSpec) -> ContainerStatus:
    (found,) = [
        c
        for c in daemon.build_request(0).containers
        if (c.allocation_id, c.rank) == (spec.allocation_id, spec.rank)
    ]
    return found


def until_started(daemon: Daemon, spec: TaskSpec) -> ContainerStatus:
    """Refresh until the starter's work on ``spec`` is settled (RUNNING, or EXITED already:
    a quick task may end within the refresh that settles its start)."""

    def started() -> bool:
        daemon.refresh()
        return status(daemon, spec).state != "STARTING"

    wait_for("the container to be started", started)
    return status(daemon, spec)


def until_exited(daemon: Daemon, spec: TaskSpec) -> ContainerStatus:
    def exited() -> bool:
        daemon.refresh()
        return status(daemon, spec).state == "EXITED"

    wait_for("the container to be reported EXITED", exited)
    return status(daemon, spec)


def every_line(master: Master, daemon: Daemon, task_id: str) -> list[dict[str, Any]]:
    """The task's lines at the master, then those that travel with the exits, in order."""
    lines = master.task_logs(task_id)
    for key in sorted(daemon.containers):
        lines += [line.model_dump() for line in daemon.containers[key].status().logs]
    return lines


def output(daemon: Daemon, spec: TaskSpec) -> str:
    path = container_dir(daemon.settings.home, spec.allocation_id, spec.rank) / "stdout.log"
    return path.read_text() if path.exists() else ""


def test_start_report_exit_logs_and_forget(daemon: Daemon, master: Master, trial: TrialEnv) -> None:
    script = "import os; print(sorted(os.listdir('.'))); print(os.environ['DET_AGENT_ID'])"
    spec = task_spec(
        trial, script, has_context=True, info_files={"cluster.json": '{"master_url": ""}'}
    )
    assert daemon.apply(SyncResponse(start=[spec])) is True
    assert status(daemon, spec).state == "STARTING"  # the starter has it
    first = until_started(daemon, spec)
    assert first.pid
    daemon.apply(SyncResponse(start=[spec]))  # idempotent per (allocation, rank)
    assert status(daemon, spec).pid == first.pid
    assert len(daemon.containers) == 1

    final = until_exited(daemon, spec)
    assert (final.exit_code, final.exit_reason) == (0, None)
    # Every line is either at the master already or travels with the exit, in order.
    shipped = [(e["log"], e["source"]) for e in master.task_logs(trial.task_id)]
    last = [(line.log, line.source) for line in final.logs]
    assert shipped + last == [
        ("['train.py']\n", "task"),
        ("agent-t\n", "task"),
        ("container exited with code 0\n", "agent"),
    ]
    # (the exit line itself travels with the exit unless the shipper had it in flight: the
    # module's contract allows either, and a loaded machine takes the second path)
    assert {line.container_id for line in final.logs} <= {spec.container_id}
    info = container_dir(daemon.settings.home, trial.allocation_id, 0) / "run/info/cluster.json"
    assert json.loads(info.read_text()) == {"master_url": master.url}

    request = daemon.build_request(20.0)
    assert (request.wait_seconds, request.slots, request.addresses) == (20.0, SLOTS, ["127.0.0.1"])
    assert daemon.apply(SyncResponse(forget=[f"{trial.allocation_id}/0"])) is False  # no news
    assert daemon.build_request(0).containers == []
    assert not (daemon.settings.home / "tasks" / trial.allocation_id).exists()
    assert daemon.apply(SyncResponse()) is False


def test_kill_stops_every_rank_sigkill_after_the_grace(
    daemon: Daemon, master: Master, trial: TrialEnv
) -> None:
    polite, stubborn = task_spec(trial, SLEEPER), task_spec(trial, STUBBORN, rank=1)
    daemon.apply(SyncResponse(start=[polite, stubborn]))
    for spec in (polite, stubborn):  # RUNNING, as the loop's next refresh sees them: the kill
        # signals at once (one that finds the starter still busy signals at the refresh after)
        assert until_started(daemon, spec).state == "RUNNING"
    wait_for(
        "the children to start",
        lambda: all("up" in output(daemon, spec) for spec in (polite, stubborn)),
    )
    daemon.apply(SyncResponse(kill=[trial.allocation_id], kill_grace_seconds=0.3))
    wait_for("SIGTERM to be ignored", lambda: "no" in output(daemon, stubborn))
    assert (until_exited(daemon, polite).exit_code, status(daemon, polite).exit_reason) == (
        -15,
        "killed by SIGTERM",
    )
    killed = until_exited(daemon, stubborn)
    assert (killed.exit_code, killed.exit_reason) == (-9, "killed by SIGKILL")
    lines = every_line(master, daemon, trial.task_id)
    agent_lines = [e["log"] for e in lines if e["source"] == "agent"]
    assert "container did not stop after SIGTERM; sending SIGKILL\n" in agent_lines
    assert agent_lines.count("stopping container: SIGTERM, SIGKILL after 0.3s\n") == 2


def test_start_failures_are_reported_as_exits_without_a_code(
    daemon: Daemon, master: Master, trial: TrialEnv
) -> None:
    missing = task_spec(trial, "", argv=["/nonexistent/train"])
    bad_context = task_spec(trial, "", rank=1, has_context=True, token="wrong-token")
    daemon.apply(SyncResponse(start=[missing, bad_context]))
    first, second = until_exited(daemon, missing), until_exited(daemon, bad_context)
    assert first.exit_code is None
    assert first.exit_reason is not None
    assert first.exit_reason.startswith("failed to start: cannot start '/nonexistent/train'")
    assert second.exit_code is None
    assert "model definition" in (second.exit_reason or "")
    lines = [e["log"] for e in every_line(master, daemon, trial.task_id)]
    assert any(line.startswith("container failed to start: cannot start") for line in lines)


def test_forget_keeps_running_containers_and_ignores_unknown_ones(
    daemon: Daemon, trial: TrialEnv
) -> None:
    spec = task_spec(trial, SLEEPER)
    daemon.apply(SyncResponse(start=[spec], forget=["nope.1/0", "garbage"]))
    until_started(daemon, spec)
    daemon.apply(SyncResponse(forget=[f"{trial.allocation_id}/0"]))
    assert status(daemon, spec).state == "RUNNING"
    assert daemon.apply(SyncResponse(kill=["unknown.1"])) is False  # nothing new to report
    assert status(daemon, spec).state == "RUNNING"


def test_shutdown_leaves_containers_unless_asked_to_kill(daemon: Daemon, trial: TrialEnv) -> None:
    spec = task_spec(trial, SLEEPER)
    daemon.apply(SyncResponse(start=[spec]))
    pid = until_started(daemon, spec).pid
    assert pid is not None
    daemon.shutdown(kill=False, grace=0.0)
    assert daemon.refresh() is False
    assert status(daemon, spec).state == "RUNNING"
    os.kill(pid, 0)  # still alive
    daemon.shutdown(kill=True, grace=0.2)
    assert status(daemon, spec).state == "EXITED"


def test_a_restarted_agent_reports_what_its_earlier_life_started_as_lost(
    master: Master, trial: TrialEnv, tmp_path: Path
) -> None:
    """The master may never have heard that the earlier life's container ran (the RUNNING
    report died with the agent): the new life reports it exited, never runs its spec again,
    and removes its directory once the master forgets it. A container the earlier life never
    started is simply forgotten (the master sends its start again)."""
    home = tmp_path / "agent"
    spec = task_spec(trial, SLEEPER)
    unstarted = container_dir(home, "other.1", 0)
    with httpx.Client() as http:
        first = make_daemon(agent_settings(master.url, home), http)
        try:
            first.apply(SyncResponse(start=[spec]))
            until_started(first, spec)  # the starter is done: its pid file is written
            wait_for("the container to start", lambda: "up" in output(first, spec))
            unstarted.mkdir(parents=True)  # as a start waiting for its image leaves it
            assert kill_leftovers(home) == [f"{trial.allocation_id}/rank-0"]  # the agent died
            assert until_exited(first, spec).exit_code == -9  # (reaped)
        finally:
            first.shutdown(kill=True, grace=0.0)  # nothing left, unless an assertion failed
            first.shipper.close(timeout=2.0)
        second = make_daemon(agent_settings(master.url, home), http)
        try:
            assert not unstarted.exists()
            (lost,) = second.build_request(0).containers
            assert (lost.allocation_id, lost.rank, lost.state) == (trial.allocation_id, 0, "EXITED")
            assert lost.exit_code is None
            assert lost.exit_reason is not None
            assert lost.exit_reason.startswith("lost: agent agent-t restarted while it ran")
            assert second.apply(SyncResponse(start=[spec])) is False  # never run twice
            assert second.containers == {}
            second.apply(SyncResponse(forget=[f"{trial.allocation_id}/0"]))
            assert second.build_request(0).containers == []
            assert not (home / "tasks" / trial.allocation_id).exists()
        finally:
            second.shutdown(kill=True, grace=0.0)
            second.shipper.close(timeout=2.0)


class SlowDownloads:
    """Holds the starter at the model definition download of the ranks in ``held`` until
    :meth:`release` (a download from a slow master)."""

    def __init__(self, *held: int) -> None:
        self.held = set(held)
        self.reached = threading.Event()
        self._go = threading.Event()

    def __call__(self, spec: TaskSpec) -> None:
        if spec.rank in self.held:
            self.reached.set()
            assert self._go.wait(30), "the test never released the download"

    def release(self) -> None:
        self._go.set()


@pytest.fixture
def slow() -> SlowDownloads:
    return SlowDownloads(1)


@pytest.fixture
def slow_daemon(master: Master, tmp_path: Path, slow: SlowDownloads) -> Iterator[Daemon]:
    with httpx.Client() as http:
        agent = make_daemon(agent_settings(master.url, tmp_path / "agent"), http, slow)
        yield agent
        slow.release()
        agent.shutdown(kill=True, grace=0.0)
        agent.shipper.close(timeout=2.0)


def test_an_exit_is_reported_while_the_starter_is_busy(
    slow_daemon: Daemon, slow: SlowDownloads, trial: TrialEnv
) -> None:
    """Starting takes a while (workspaces, downloads, forks): a container that exits
    meanwhile is reported at once, and the wave is news only once every start is done."""
    quick = task_spec(trial, "print('done')")
    held = task_spec(trial, SLEEPER, rank=1, has_context=True)
    slow_daemon.apply(SyncResponse(start=[quick, held]))
    assert until_exited(slow_daemon, quick).exit_code == 0
    wait_for("the second download to begin", slow.reached.is_set)
    assert status(slow_daemon, held).state == "STARTING"
    assert slow_daemon.take_launched() is False  # the starter still has the second one
    slow.release()
    assert until_started(slow_daemon, held).state == "RUNNING"
    assert slow_daemon.take_launched() is True
    assert slow_daemon.take_launched() is False  # said once


def test_a_kill_while_starting_never_starts_the_task(
    slow_daemon: Daemon, slow: SlowDownloads, master: Master, trial: TrialEnv
) -> None:
    held = task_spec(trial, SLEEPER, rank=1, has_context=True)
    slow_daemon.apply(SyncResponse(start=[held]))
    wait_for("the download to begin", slow.reached.is_set)
    slow_daemon.apply(SyncResponse(kill=[trial.allocation_id], kill_grace_seconds=5.0))
    slow_daemon.refresh()
    assert status(slow_daemon, held).state == "STARTING"  # settled once the starter is done
    slow.release()
    final = until_exited(slow_daemon, held)
    assert (final.exit_code, final.exit_reason) == (None, "killed before it started")
    assert output(slow_daemon, held) == ""
    lines = [e["log"] for e in every_line(master, slow_daemon, trial.task_id)]
    assert "container killed before it started\n" in lines


def test_a_kill_that_comes_as_the_start_ends_stops_the_task(
    daemon: Daemon, trial: TrialEnv
) -> None:
    """Started by the starter, not yet seen by the loop thread: the kill still reaches it."""
    spec = task_spec(trial, SLEEPER)
    daemon.apply(SyncResponse(start=[spec]))
    wait_for("the task to run", lambda: "up" in output(daemon, spec))  # no refresh meanwhile
    daemon.apply(SyncResponse(kill=[trial.allocation_id], kill_grace_seconds=5.0))
    final = until_exited(daemon, spec)
    assert (final.exit_code, final.exit_reason) == (-15, "killed by SIGTERM")


def test_the_reports_a_task_left_in_its_spool_travel_with_its_exit(
    daemon: Daemon, master: Master, trial: TrialEnv
) -> None:
    """What Stalwart's harness hands over when it closes (``STALWART_REPORTS_SPOOL``) is in the
    exit's report, and only there; a file that is not a batch body is said in the log."""
    batch = {"reports": [{"group": "validation", "metrics": {"trialId": 1, "stepsCompleted": 5}}]}
    script = (
        "import json, os, pathlib\n"
        "spool = pathlib.Path(os.environ['STALWART_REPORTS_SPOOL'])\n"
        f"(spool / 'reports-1.json').write_text(json.dumps({batch!r}))\n"
        "(spool / 'reports-2.json').write_text('not json')\n"
    )
    spec = task_spec(trial, script)
    daemon.apply(SyncResponse(start=[spec]))
    final = until_exited(daemon, spec)
    assert final.exit_code == 0
    assert final.reports == batch["reports"]
    lines = [e["log"] for e in every_line(master, daemon, trial.task_id)]
    assert any("reports-2.json could not be read" in line for line in lines), lines


def test_a_queued_successor_starts_the_moment_its_predecessor_exits(
    daemon: Daemon, master: Master, trial: TrialEnv, tmp_path: Path
) -> None:
    """The successor waits (QUEUED) while its predecessor runs, and is on its way (STARTING or
    further) by the time the predecessor's exit is reported: no sync in between."""
    go = tmp_path / "go"
    wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
    before = task_spec(trial, wait)
    nxt = master.trial()
    after = task_spec(nxt, "print('next', flush=True)", after=trial.allocation_id)
    daemon.apply(SyncResponse(start=[before]))
    assert until_started(daemon, before).state == "RUNNING"
    daemon.apply(SyncResponse(start=[after]))
    daemon.refresh()
    assert status(daemon, after).state == "QUEUED"
    go.touch()
    assert until_exited(daemon, before).exit_code == 0
    assert status(daemon, after).state != "QUEUED"
    final = until_exited(daemon, after)
    assert (final.exit_code, output(daemon, after)) == (0, "next\n")


def test_a_queued_successor_killed_never_runs_and_one_with_nothing_ahead_starts_now(
    daemon: Daemon, master: Master, trial: TrialEnv
) -> None:
    before = task_spec(trial, SLEEPER)
    daemon.apply(SyncResponse(start=[before]))
    until_started(daemon, before)
    killed_trial, free_trial = master.trial(), master.trial()
    killed = task_spec(killed_trial, "print('ran', flush=True)", after=trial.allocation_id)
    free = task_spec(free_trial, "print('free', flush=True)", after="gone.1")  # not here
    daemon.apply(SyncResponse(start=[killed, free]))
    assert status(daemon, killed).state == "QUEUED"
    assert status(daemon, free).state == "STARTING"
    daemon.apply(SyncResponse(kill=[killed_trial.allocation_id], kill_grace_seconds=1.0))
    final = until_exited(daemon, killed)
    assert (final.exit_code, final.exit_reason) == (None, "killed before it started")
    daemon.apply(SyncResponse(kill=[trial.allocation_id], kill_grace_seconds=1.0))
    until_exited(daemon, before)
    assert output(daemon, killed) == ""  # its predecessor's exit did not start it
    assert until_exited(daemon, free).exit_code == 0
    assert output(daemon, free) == "free\n"
