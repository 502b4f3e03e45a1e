"""The batch-job launcher's pure parts (the whole launcher runs in ``test_master_slurm.py``)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import httpx
import pytest

from stalwart.agent.protocol import TaskSpec
from stalwart.hpc.task import LaunchError, _Signals, run_task, visible_slot_ids
from stalwart.master.services.allocations import preemption_requested, signal_preemption
from tests.agent.conftest import Master, master_settings, serve
from tests.master.test_allocations_api import TrialEnv


def _spec(device: str, slots: list[str]) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "allocation_id": "1.a.1",
            "task_id": "1.a",
            "rank": 0,
            "container_id": "c",
            "slot_ids": slots,
            "device_type": device,
            "argv": ["true"],
            "token": "t",
        }
    )


def test_the_gpus_slurm_made_visible_become_the_slot_ids() -> None:
    assert visible_slot_ids(_spec("cuda", ["0", "1"]), {"CUDA_VISIBLE_DEVICES": "2,3"}) == [
        "2",
        "3",
    ]
    assert visible_slot_ids(_spec("rocm", ["0"]), {"ROCR_VISIBLE_DEVICES": "1"}) == ["1"]
    assert visible_slot_ids(_spec("cuda", ["0"]), {}) == ["0"]
    assert visible_slot_ids(_spec("cpu", []), {"CUDA_VISIBLE_DEVICES": "0"}) == []


def test_the_launcher_needs_its_inputs() -> None:
    with pytest.raises(LaunchError, match="STALWART_TOKEN_FILE"):
        run_task({"STALWART_MASTER_URL": "http://m:8080", "STALWART_ALLOCATION_ID": "a"})


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    with serve(master_settings(tmp_path_factory.mktemp("master"))) as live:
        yield live


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as http:
        yield http


def _signals(
    client: httpx.Client, master: Master, trial: TrialEnv, *, preemptible: bool
) -> _Signals:
    """The launcher's signal state for ``trial``'s allocation on a live master."""
    base = f"{master.url}/api/v1/allocations/{trial.allocation_id}"
    signals = _Signals(client, base, trial.token)
    signals.preemptible = preemptible
    return signals


def test_a_sigterm_after_a_commands_exit_still_leaves_the_verdict_to_slurm(
    master: Master, client: httpx.Client
) -> None:
    # proctrack/linuxproc signals the task's processes before the launcher: the command may
    # have exited (even 0: a shell whose child died first) before the launcher's SIGTERM.
    trial = master.trial()
    signals = _signals(client, master, trial, preemptible=False)
    assert signals.handle_after_exit() is None  # no signal: nothing to ask
    assert signals.reports_exit(0)
    assert signals.reports_exit(3)
    signals.on_signal(signal.SIGTERM, None)
    line = signals.handle_after_exit()
    assert line is not None
    assert "Slurm stopped it" in line, line
    assert not signals.reports_exit(0)
    assert not signals.reports_exit(7)
    assert signals.handle_after_exit() is None  # asked once
    with master.state.sessions() as session:  # a command's stop is never a preemption
        assert not preemption_requested(session, trial.allocation_id)


def test_a_late_sigterm_from_the_masters_kill_is_reported_and_a_trials_is_not_asked(
    master: Master, client: httpx.Client
) -> None:
    killed = master.trial()
    signal_preemption(master.state.sessions, master.state.notifier, killed.allocation_id)
    command = _signals(client, master, killed, preemptible=False)
    command.on_signal(signal.SIGTERM, None)
    line = command.handle_after_exit()
    assert line is not None
    assert "Slurm" not in line, line
    assert command.reports_exit(-15)  # the master is stopping it: its exit is reported

    running = master.trial()
    trial = _signals(client, master, running, preemptible=True)
    trial.on_signal(signal.SIGTERM, None)
    assert trial.handle_after_exit() is None  # a trial ignores SIGTERM: its exit is its own
    assert trial.reports_exit(1)
    with master.state.sessions() as session:
        assert not preemption_requested(session, running.allocation_id)  # not asked
    trial.handle()  # during the run: pending_preemption, then only its exit 0 is reported
    with master.state.sessions() as session:
        assert preemption_requested(session, running.allocation_id)
    assert trial.reports_exit(0)
    assert not trial.reports_exit(1)
