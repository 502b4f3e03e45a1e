"""PBS queues as resource pools through the master's API: the PBS counterpart of
``test_master_pools.py`` (which needs a real Slurm). An in-process master (``TestClient``) whose
cluster loop drives a :class:`~stalwart.master.rm.hpc.manager.PbsManager` on the fake PBS server
(:mod:`tests.slurm.fakepbs`) behind the real client: ``GET /api/v1/resource-pools`` lists the
queues (what the cluster page shows), ``POST /api/v1/experiments`` refuses a pool that is not a
queue, and a trial in a queue is ``qsub -q``'d there and counted in its pool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.pbs.client import PbsClient
from stalwart.master.app import create_app
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.rm.hpc.manager import PbsManager
from tests.master.conftest import login, make_settings
from tests.master.test_experiment_create import file_entry
from tests.slurm.fakepbs import FakePbs, PbsNodeRow, PbsQueueRow

CONFIG = """\
name: pbs-pools
entrypoint: python3 train.py
resources:
  slots_per_trial: 1
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
"""


def _fake() -> FakePbs:
    """``workq`` (default, CPU nodes), ``gpuq`` (GPU nodes by Qlist), a disabled ``maint``, a
    routing ``route`` and a stopped ``arch``."""
    return FakePbs(
        queues={
            "workq": PbsQueueRow(qlist="workq", walltime="24:00:00"),
            "gpuq": PbsQueueRow(qlist="gpuq"),
            "maint": PbsQueueRow(enabled=False),
            "route": PbsQueueRow(queue_type="Route", route_destinations=("workq", "gpuq")),
            "arch": PbsQueueRow(qlist="workq", started=False),
        },
        nodes={
            "cn1": PbsNodeRow(ncpus=16, qlist=("workq",), cpus_assigned=4),
            "cn2": PbsNodeRow(ncpus=16, qlist=("workq",), state="job-busy", cpus_assigned=16),
            "cn3": PbsNodeRow(ncpus=16, qlist=("workq",), state="down,offline"),
            "gn1": PbsNodeRow(ncpus=64, ngpus=4, qlist=("gpuq",), gpus_assigned=1),
            "gn2": PbsNodeRow(ncpus=64, ngpus=4, qlist=("gpuq",)),
        },
    )


Master = tuple[TestClient, dict[str, str], FakePbs, ClusterLoop]


def _master(tmp_path: Path, fake: FakePbs, **extra: Any) -> Iterator[Master]:
    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "pbs",
            "job_storage_root": str(tmp_path / "jobs"),
            "master_url": "http://head:8080",
            "poll_interval": 0.001,
            **extra,
        },
    )
    with TestClient(create_app(settings, run_cluster=False)) as client:
        state = client.app.state.master  # type: ignore[attr-defined]
        assert isinstance(state.rm, PbsManager)  # chosen from resource_manager.type
        state.rm = PbsManager(state, client=PbsClient(fake.runner))
        loop = ClusterLoop(state)
        yield client, login(client, "admin"), fake, loop


@pytest.fixture
def master(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Master]:
    """Indirect parametrization: extra ``resource_manager`` settings."""
    yield from _master(tmp_path, _fake(), **getattr(request, "param", {}))


def _pools(client: TestClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    resp = client.get("/api/v1/resource-pools", headers=headers)
    assert resp.status_code == 200, resp.text
    return {p["name"]: p for p in resp.json()["resourcePools"]}


def _create(client: TestClient, headers: dict[str, str], config: str) -> Any:
    return client.post(
        "/api/v1/experiments",
        json={
            "activate": True,
            "config": config,
            "modelDefinition": [file_entry("train.py", b"print('hi')\n")],
            "parentId": None,
            "projectId": None,
            "template": None,
            "validateOnly": False,
        },
        headers=headers,
    )


def _in(pool: str, slots: int = 1) -> str:
    """CONFIG with ``resources.resource_pool: pool``."""
    return CONFIG.replace(
        "slots_per_trial: 1", f"slots_per_trial: {slots}\n  resource_pool: {pool}"
    )


def test_queues_are_the_resource_pools(master: Master) -> None:
    client, headers, fake, _ = master
    pools = _pools(client, headers)
    # maint is disabled and route is a routing queue: not pools. arch is stopped: no slots.
    assert list(pools) == ["workq", "gpuq", "arch"]
    workq, gpuq, arch = pools["workq"], pools["gpuq"], pools["arch"]
    assert workq["defaultComputePool"] is True  # the server's default_queue
    assert gpuq["defaultComputePool"] is False
    assert workq["schedulerType"] == "SCHEDULER_TYPE_PBS"
    assert workq["schedulerFittingPolicy"] == "FITTING_POLICY_PBS"
    assert workq["slotType"] == "TYPE_CPU"
    assert workq["numAgents"] == 2  # a usable node is an agent; cn3 is down
    assert workq["slotsPerAgent"] == 16
    assert workq["slotsAvailable"] == 32
    assert workq["slotsUsed"] == 20  # pbsnodes' assigned CPUs: others' jobs count too
    assert workq["description"] == "PBS queue workq: cpu slots, walltime at most 24:00:00"
    assert gpuq["slotType"] == "TYPE_CUDA"  # its nodes have ngpus
    assert (gpuq["numAgents"], gpuq["slotsPerAgent"], gpuq["slotsAvailable"]) == (2, 4, 8)
    assert gpuq["slotsUsed"] == 1  # pbsnodes shows assigned GPUs, unlike sinfo
    assert gpuq["accelerator"] is None
    assert (arch["numAgents"], arch["slotsAvailable"], arch["slotsUsed"]) == (0, 0, 0)
    assert "stopped" in arch["description"]
    # One qstat -Q, one pbsnodes, one qstat -B, then cached (POOLS_REFRESH_S).
    _pools(client, headers)
    assert fake.runner.count("pbsnodes") == 1
    assert sorted(c[:2] for c in fake.runner.calls) == [
        ("pbsnodes", "-a"),
        ("qstat", "-B"),
        ("qstat", "-Q"),
    ]


@pytest.mark.parametrize(
    "master",
    [{"partition_overrides": {"gpuq": {"slot_type": "rocm"}}, "default_partition": "gpuq"}],
    indirect=True,
)
def test_overrides_set_the_slot_type_and_default_partition_the_default(master: Master) -> None:
    client, headers, fake, _ = master
    pools = _pools(client, headers)
    assert pools["gpuq"]["slotType"] == "TYPE_ROCM"
    assert pools["gpuq"]["defaultComputePool"] is True
    assert pools["workq"]["defaultComputePool"] is False
    assert fake.runner.count("qstat") == 1  # default_partition: no qstat -B


def test_a_pool_that_is_not_a_queue_is_refused_at_create(master: Master) -> None:
    client, headers, fake, loop = master
    for pool in ("gpus", "maint", "route"):  # unknown, disabled, routing
        resp = _create(client, headers, _in(pool))
        assert resp.status_code == 400, resp.text
        message = resp.json()["message"]
        assert f"resource pool '{pool}' is not a PBS queue of this cluster" in message, message
        assert "arch, gpuq, workq" in message
        assert "leave it unset for the default queue (the default one is workq)" in message
    assert client.get("/api/v1/experiments", headers=headers).json()["experiments"] == []
    # A queue is accepted, and its jobs go there.
    resp = _create(client, headers, _in("gpuq", slots=2))
    assert resp.status_code == 200, resp.text
    assert resp.json()["experiment"]["resourcePool"] == "gpuq"
    loop.run_round()
    (script,) = fake.scripts
    assert "#PBS -q gpuq" in script
    assert "#PBS -l select=1:ncpus=1:ngpus=2:mpiprocs=1" in script  # cuda, from the pool
    (job,) = fake.jobs.values()
    assert job.queue == "gpuq"
    pools = _pools(client, headers)
    assert pools["gpuq"]["stats"]["queuedCount"] == 1  # qsub'd, waiting in PBS's queue
    assert pools["workq"]["stats"]["queuedCount"] == 0


def test_the_default_pool_goes_to_the_default_queue(master: Master) -> None:
    client, headers, fake, loop = master
    resp = _create(client, headers, CONFIG)
    assert resp.status_code == 200, resp.text
    loop.run_round()
    (script,) = fake.scripts
    assert "#PBS -q" not in script  # the server's default_queue takes it
    assert "#PBS -l select=1:ncpus=1:mpiprocs=1" in script  # workq is a CPU queue
    (job,) = fake.jobs.values()
    assert job.queue == "workq"
    fake.jobs[next(iter(fake.jobs))].state = "R"
    loop.run_round()
    pools = _pools(client, headers)
    assert pools["workq"]["stats"] == {"queuedCount": 0, "scheduledCount": 1}


def test_a_stopped_queue_accepts_experiments(master: Master) -> None:
    client, headers, _, _ = master
    assert _create(client, headers, _in("arch")).status_code == 200


def test_a_server_that_does_not_answer_keeps_the_last_pools(tmp_path: Path) -> None:
    fake = _fake()
    fake.down = "cannot connect to server pbs-head (errno=111)"
    for client, headers, _, loop in _master(tmp_path, fake):
        # Nothing known yet: the agents' view, and any pool is accepted (qsub decides).
        assert "workq" not in _pools(client, headers)
        assert _create(client, headers, _in("x")).status_code == 200
        fake.down = None
        manager = loop.rm
        assert isinstance(manager, PbsManager)
        assert [p.name for p in manager.pools(refresh=True)] == ["workq", "gpuq", "arch"]
        fake.down = "cannot connect to server pbs-head (errno=111)"
        with pytest.raises(HpcCommandError):
            manager.system.partitions()
        assert [p.name for p in manager.pools(refresh=True)] == ["workq", "gpuq", "arch"]
        assert list(_pools(client, headers)) == ["workq", "gpuq", "arch"]
