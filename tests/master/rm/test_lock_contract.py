"""The state lock's contract (``stalwart.master.rm.base``): no engine call runs under it.

A master runs its cluster loop round in a thread while the engine hangs in the middle of a
submission (a fake ``sbatch`` that waits on an event; separately, a Kubernetes API server that
holds the create of a Job's objects). While it hangs, a user pauses one experiment and kills
another over HTTP and an agent syncs, and every one of them is answered; then the engine is
released and the submission completes (its job id recorded), and the next round carries out
the pause.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from stalwart.hpc.layout import BatchRequest
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Allocation, Experiment, Trial
from stalwart.master.rm.hpc.manager import SlurmManager
from stalwart.master.rm.kubernetes.manager import KubernetesManager
from stalwart.master.rm.kubernetes.manifests import job_name
from stalwart.master.state import MasterState
from tests.k8s.fake_api import FakeKube
from tests.master.cluster.test_slurm_manager import FakeSlurm
from tests.master.conftest import enroll, make_settings
from tests.master.test_allocations_api import create_experiment, live_server, login_headers

WAIT_S = 30.0
"""Longest wait for anything in these tests (a failure, not a pace)."""

SYNC = {"slots": [{"id": "0", "device_type": "cpu"}], "containers": [], "wait_seconds": 0}


class HungSlurm(FakeSlurm):
    """``sbatch`` hangs until ``released`` is set; ``entered`` says it was called."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.released = threading.Event()

    def submit(self, request: BatchRequest) -> str:
        self.entered.set()
        assert self.released.wait(WAIT_S), "the test never released sbatch"
        return super().submit(request)


@dataclass
class Hang:
    """An engine call that hangs: ``entered`` is set once it was called; it returns once
    ``released`` is set."""

    entered: threading.Event
    released: threading.Event


def _a_hung_engine_holds_up_no_one(http: httpx.Client, state: MasterState, hang: Hang) -> int:
    """Create two experiments, run a round in a thread until the engine hangs in the first
    one's submission, then pause that one, kill the other and sync an agent: each must be
    answered while the engine still hangs. Release it; the round must end without error. The
    paused experiment's id."""
    headers = login_headers(http)
    agent = enroll(http, "n1", state.agent_token)
    paused = create_experiment(http, headers)
    killed = create_experiment(http, headers)
    loop = ClusterLoop(state)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            loop.run_round()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="cluster-round")
    thread.start()
    try:
        assert hang.entered.wait(WAIT_S), "the round never reached the engine"
        assert http.post(f"/api/v1/experiments/{paused}/pause", headers=headers).status_code == 200
        assert http.post(f"/api/v1/experiments/{killed}/kill", headers=headers).status_code == 200
        synced = http.post("/api/v1/agents/n1/sync", json=SYNC, headers=agent)
        assert synced.status_code == 200, synced.text
        assert thread.is_alive()  # all of it answered while the engine still hangs
        assert _experiment_state(state, paused) == "PAUSED"
    finally:
        hang.released.set()
        thread.join(WAIT_S)
    assert not errors
    assert _experiment_state(state, killed) in ("STOPPING_KILLED", "CANCELED")
    return paused


def _experiment_state(state: MasterState, experiment_id: int) -> str:
    with state.sessions() as session:
        experiment = session.get(Experiment, experiment_id)
        assert experiment is not None
        return experiment.state


def _allocation_of(state: MasterState, experiment_id: int) -> Allocation:
    with state.sessions() as session:
        found = session.scalars(
            select(Allocation)
            .join(Trial, Trial.task_id == Allocation.task_id)
            .where(Trial.experiment_id == experiment_id)
            .order_by(Allocation.id)
        ).first()
        assert found is not None
        return found


def test_a_hung_sbatch_holds_up_neither_users_nor_agents(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "slurm",
            "job_storage_root": str(tmp_path / "jobs"),
            "master_url": "http://head:8080",
            "poll_interval": 0.001,
        },
    )
    slurm = HungSlurm()
    with live_server(settings) as live, httpx.Client(base_url=live.url, timeout=WAIT_S) as http:
        state = live.state
        state.rm = SlurmManager(state, client=slurm)
        paused = _a_hung_engine_holds_up_no_one(http, state, Hang(slurm.entered, slurm.released))
        submitted = _allocation_of(state, paused)
        assert submitted.batch_job_id == "100"  # the submission completed and was recorded
        ClusterLoop(state).run_round()  # the pause asked meanwhile: the job is cancelled
        assert slurm.cancelled == ["100"]


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube(bookmark_interval=0.2, token="master-token")
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def test_a_hung_kubernetes_api_holds_up_neither_users_nor_agents(
    tmp_path: Path, kube: FakeKube
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube.kubeconfig("stalwart"))
    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "kubernetes",
            "namespace": "stalwart",
            "kubeconfig": str(kubeconfig),
            "master_url": "http://master:8080",
            "slot_type": "cpu",
            "prepull": {"enabled": False},
        },
    )
    held = kube.hold("POST", "configmaps")  # the first object of an allocation's Job
    with live_server(settings) as live, httpx.Client(base_url=live.url, timeout=WAIT_S) as http:
        state = live.state
        assert isinstance(state.rm, KubernetesManager)  # built from resource_manager.type
        paused = _a_hung_engine_holds_up_no_one(http, state, Hang(held.entered, held.released))
        created = _allocation_of(state, paused)
        job = ("jobs", "stalwart", job_name(created.id))
        assert created.batch_job_id == job[2]  # the Job was created and recorded
        assert job in kube.objects
        ClusterLoop(state).run_round()  # the pause asked meanwhile: the Job is deleted
        assert job not in kube.objects
