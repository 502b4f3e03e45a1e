"""PBS queues as resource pools: the ``qstat -Q``, ``pbsnodes`` and ``qstat -B`` parsers on the
hand-written OpenPBS 23 samples, :func:`~stalwart.hpc.pbs.queues.queues_to_pools`, the client's
three commands and :class:`~stalwart.master.rm.hpc.systems.PbsSystem` on the fake PBS."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.pbs.client import PbsClient
from stalwart.hpc.pbs.parse import (
    PbsNode,
    PbsParseError,
    PbsQueue,
    parse_pbsnodes_json,
    parse_qstat_queues_json,
    parse_qstat_server_json,
    parse_size_mb,
    pbsnodes_argv,
    qstat_queues_argv,
    qstat_server_argv,
)
from stalwart.hpc.pbs.queues import node_serves, node_usable, queues_to_pools
from stalwart.hpc.pbs.script import PbsOptions
from stalwart.hpc.runner import CommandResult, ReplayRunner
from stalwart.hpc.slurm.partitions import PartitionOverride, PartitionPool
from stalwart.master.rm.hpc.settings import PbsSettings
from stalwart.master.rm.hpc.systems import PbsSystem
from tests.slurm.conftest import fixture_text
from tests.slurm.fakepbs import FakePbs, PbsJobRow, PbsNodeRow, PbsQueueRow
from tests.slurm.test_pbs_client import _request

QUEUES = "pbs_qstat_Q_f_json.sample.json"
NODES = "pbs_pbsnodes_a_f_json.sample.json"
SERVER = "pbs_qstat_B_f_json.sample.json"


def _sample_pools(**kwargs: object) -> dict[str, PartitionPool]:
    queues = parse_qstat_queues_json(fixture_text(QUEUES))
    nodes = parse_pbsnodes_json(fixture_text(NODES))
    default = parse_qstat_server_json(fixture_text(SERVER))
    pools = queues_to_pools(queues, nodes, default_queue=default, **kwargs)  # type: ignore[arg-type]
    return {p.name: p for p in pools}


# -- parsers ------------------------------------------------------------------------------------


def test_qstat_queues_reads_every_queue_in_the_servers_order() -> None:
    queues = parse_qstat_queues_json(fixture_text(QUEUES))
    assert [q.name for q in queues] == ["workq", "gpuq", "debugq", "maintq", "archq", "routeq"]
    by_name = {q.name: q for q in queues}
    gpuq = by_name["gpuq"]
    assert (gpuq.queue_type, gpuq.enabled, gpuq.started, gpuq.execution) == (
        "Execution",
        True,
        True,
        True,
    )
    assert gpuq.qlist == "gpuq"
    assert gpuq.walltime_max == "48:00:00"
    assert ("ngpus", "8") in gpuq.resources_max
    assert gpuq.resources_default == (("walltime", "04:00:00"),)
    assert by_name["debugq"].qlist is None
    assert not by_name["maintq"].enabled
    assert not by_name["archq"].started
    assert not by_name["routeq"].execution


def test_pbsnodes_reads_states_resources_and_queue_bindings() -> None:
    nodes = {n.name: n for n in parse_pbsnodes_json(fixture_text(NODES))}
    assert nodes["cpu01"] == PbsNode(
        name="cpu01",
        states=("free",),
        cpus=32,
        cpus_assigned=8,
        gpus=0,
        gpus_assigned=0,
        memory_mb=192785,
        queue=None,
        qlist=("workq",),
    )
    assert nodes["cpu03"].states == ("down", "offline")
    assert nodes["cpu04"].queue == "debugq"
    assert (nodes["gpu01"].gpus, nodes["gpu01"].gpus_assigned) == (4, 2)
    assert nodes["gpu01"].memory_mb == 514260
    assert nodes["gpu02"].states == ("offline",)


def test_pbsnodes_counts_gpus_with_the_configured_resource() -> None:
    text = fixture_text(NODES).replace('"ngpus"', '"gpus"')
    nodes = {n.name: n for n in parse_pbsnodes_json(text, gpu_resource="gpus")}
    assert nodes["gpu01"].gpus == 4
    assert {n.name: n.gpus for n in parse_pbsnodes_json(text)}["gpu01"] == 0


def test_qstat_server_gives_the_default_queue() -> None:
    assert parse_qstat_server_json(fixture_text(SERVER)) == "workq"
    assert parse_qstat_server_json('{"Server": {"h": {"server_state": "Active"}}}') is None
    assert parse_qstat_server_json('{"pbs_server": "h"}') is None


def test_empty_documents_and_bad_ones() -> None:
    assert parse_qstat_queues_json('{"timestamp": 1, "pbs_server": "h"}') == []
    assert parse_pbsnodes_json('{"timestamp": 1}') == []
    with pytest.raises(PbsParseError, match="qstat -Q"):
        parse_qstat_queues_json("not json")
    with pytest.raises(PbsParseError, match="'nodes' is not an object"):
        parse_pbsnodes_json('{"nodes": [1]}')
    with pytest.raises(PbsParseError, match="not an object"):
        parse_qstat_server_json("[]")


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("197412840kb", 192785),
        ("514260mb", 514260),
        ("394GB", 394 * 1024),
        ("2tb", 2 * 1024 * 1024),
        ("0b", 0),
        ("1048576", 1),
        ("1mw", 8),
        ("lots", 0),
        (None, 0),
    ],
)
def test_sizes(text: str | None, mb: int) -> None:
    assert parse_size_mb(text) == mb


def test_argv() -> None:
    assert qstat_queues_argv() == ["qstat", "-Q", "-f", "-F", "json"]
    assert qstat_server_argv() == ["qstat", "-B", "-f", "-F", "json"]
    assert pbsnodes_argv() == ["pbsnodes", "-a", "-F", "json"]


# -- queues to pools ----------------------------------------------------------------------------


def test_the_sample_becomes_pools() -> None:
    pools = _sample_pools()
    # maintq is disabled and routeq routes: left out. archq is stopped: kept, no usable slots.
    assert list(pools) == ["workq", "gpuq", "debugq", "archq"]
    workq = pools["workq"]
    assert workq == PartitionPool(
        name="workq",
        default=True,
        slot_type="cpu",
        nodes=3,  # cpu01-03 list workq in their Qlist
        usable_nodes=2,  # cpu03 is down,offline
        slots=64,
        slots_per_node=32,
        idle_slots=24,  # cpu01: 32 - 8; cpu02: job-busy with all 32 assigned
        cpus_per_node=32,
        memory_mb_per_node=192785,
        gpu_types=(),
        time_limit="24:00:00",
        description="PBS queue workq: cpu slots, walltime at most 24:00:00",
    )
    gpuq = pools["gpuq"]
    assert (gpuq.slot_type, gpuq.nodes, gpuq.usable_nodes) == ("cuda", 2, 1)
    assert (gpuq.slots, gpuq.slots_per_node, gpuq.idle_slots) == (4, 4, 2)
    assert not gpuq.default
    assert gpuq.description == "PBS queue gpuq: cuda GPUs, walltime at most 48:00:00"
    debugq = pools["debugq"]  # cpu04 is bound to it with its queue attribute
    assert (debugq.nodes, debugq.slots, debugq.idle_slots) == (1, 16, 16)
    archq = pools["archq"]
    assert (archq.nodes, archq.usable_nodes, archq.slots, archq.idle_slots) == (3, 0, 0, 0)
    assert archq.slots_per_node == 32  # its jobs are still shaped for its nodes
    assert archq.time_limit == "infinite"
    assert "stopped: jobs wait until it is started" in archq.description


def test_overrides_slot_type_and_the_default_queue() -> None:
    pools = _sample_pools(
        overrides={"gpuq": PartitionOverride(slot_type="rocm"), "debugq": PartitionOverride()},
        slot_type=None,
    )
    assert pools["gpuq"].slot_type == "rocm"
    assert pools["gpuq"].description.startswith("PBS queue gpuq: rocm GPUs")
    everywhere = _sample_pools(slot_type="cuda")
    assert everywhere["workq"].slot_type == "cuda"
    assert (everywhere["workq"].slots, everywhere["workq"].slots_per_node) == (0, 0)  # no GPUs
    queues = parse_qstat_queues_json(fixture_text(QUEUES))
    nodes = parse_pbsnodes_json(fixture_text(NODES))
    chosen = queues_to_pools(queues, nodes, default_queue="gpuq")
    assert [p.name for p in chosen if p.default] == ["gpuq"]
    assert not any(p.default for p in queues_to_pools(queues, nodes))


def _node(name: str, **extra: object) -> PbsNode:
    fields: dict[str, object] = {
        "name": name,
        "states": ("free",),
        "cpus": 8,
        "cpus_assigned": 0,
        "gpus": 0,
        "gpus_assigned": 0,
        "memory_mb": 1024,
        **extra,
    }
    return PbsNode(**fields)  # type: ignore[arg-type]


def test_which_nodes_serve_a_queue() -> None:
    plain = PbsQueue("workq", "Execution", True, True)
    tagged = replace(plain, name="gpuq", qlist="gpuq")
    bound = replace(plain, name="debugq")
    anywhere = _node("n1")
    listing = _node("n2", qlist=("gpuq", "other"))
    pinned = _node("n3", queue="debugq")
    assert node_serves(anywhere, plain)
    assert node_serves(listing, plain)  # Qlist only restricts which chunks fit
    assert not node_serves(pinned, plain)  # a queue attribute binds the node
    assert node_serves(listing, tagged)
    assert not node_serves(anywhere, tagged)
    assert node_serves(pinned, bound, {"debugq"})
    assert not node_serves(anywhere, bound, {"debugq"})  # hasnodes: its own nodes only


@pytest.mark.parametrize(
    ("state", "usable"),
    [
        ("free", True),
        ("job-busy", True),
        ("job-exclusive", True),
        ("resv-exclusive", True),
        ("sleep", True),
        ("down", False),
        ("offline", False),
        ("job-busy,offline", False),
        ("stale", False),
        ("state-unknown,down", False),
        ("provisioning", False),
        ("", False),
    ],
)
def test_node_states(state: str, usable: bool) -> None:
    states = tuple(s for s in state.split(",") if s)
    assert node_usable(_node("n", states=states)) is usable


def test_exclusive_nodes_have_no_idle_slots() -> None:
    queue = PbsQueue("gpuq", "Execution", True, True)
    nodes = [
        _node("a", gpus=4, gpus_assigned=1, states=("job-exclusive",)),
        _node("b", gpus=4, gpus_assigned=1),
    ]
    (pool,) = queues_to_pools([queue], nodes)
    assert (pool.slot_type, pool.slots, pool.idle_slots) == ("cuda", 8, 3)


# -- the client and the system on the fake server -----------------------------------------------


def _qstat_samples(argv: Sequence[str]) -> CommandResult:
    name = QUEUES if "-Q" in argv else SERVER
    return CommandResult(tuple(argv), 0, fixture_text(name), "")


def test_client_reads_the_samples_with_one_command_each() -> None:
    runner = ReplayRunner()
    runner.answers["qstat"] = _qstat_samples
    runner.reply("pbsnodes", fixture_text(NODES))
    client = PbsClient(runner)
    assert len(client.queues()) == 6
    assert len(client.nodes()) == 6
    assert client.default_queue() == "workq"
    assert runner.calls == [
        ("qstat", "-Q", "-f", "-F", "json"),
        ("pbsnodes", "-a", "-F", "json"),
        ("qstat", "-B", "-f", "-F", "json"),
    ]


def test_client_failures() -> None:
    runner = ReplayRunner()
    runner.reply("qstat", "", "qstat: cannot connect to server pbs-head (errno=111)", 2)
    runner.reply("pbsnodes", "{not json")
    client = PbsClient(runner)
    with pytest.raises(HpcCommandError) as caught:
        client.queues()
    assert caught.value.retryable
    with pytest.raises(HpcCommandError, match="unreadable output") as bad:
        client.nodes()
    assert not bad.value.retryable
    runner.reply("pbsnodes", "", "pbsnodes: Server has no node list\n", 1)
    assert client.nodes() == []


def _settings(tmp_path: Path, **extra: object) -> PbsSettings:
    return PbsSettings.model_validate({"type": "pbs", "job_storage_root": tmp_path, **extra})


def test_pbs_system_partitions_from_the_fake_server(tmp_path: Path) -> None:
    pbs = FakePbs(
        queues={
            "workq": PbsQueueRow(),
            "gpuq": PbsQueueRow(qlist="gpuq", walltime="12:00:00"),
            "route": PbsQueueRow(queue_type="Route", route_destinations=("workq", "gpuq")),
            "off": PbsQueueRow(enabled=False),
        },
        nodes={
            "cn1": PbsNodeRow(ncpus=8, cpus_assigned=2),
            "cn2": PbsNodeRow(ncpus=8, state="down"),
            "gn1": PbsNodeRow(ncpus=32, ngpus=4, gpus_assigned=1, qlist=("gpuq",)),
        },
        jobs={"1.pbs-head": PbsJobRow("someone-else", "R", queue="gpuq")},
    )
    system = PbsSystem(_settings(tmp_path), PbsClient(pbs.runner))
    pools = {p.name: p for p in system.partitions()}
    assert list(pools) == ["workq", "gpuq"]
    assert pools["workq"].default
    # workq has no Qlist in its default chunk: its jobs may run on gn1 too (real PBS semantics).
    assert (pools["workq"].slot_type, pools["workq"].nodes, pools["workq"].usable_nodes) == (
        "cuda",
        3,
        2,
    )
    assert (pools["gpuq"].slots, pools["gpuq"].idle_slots) == (4, 3)
    assert [c[:2] for c in pbs.runner.calls] == [
        ("qstat", "-Q"),
        ("pbsnodes", "-a"),
        ("qstat", "-B"),
    ]
    # default_partition set: no qstat -B, and that queue is the default one.
    pbs.runner.calls.clear()
    system = PbsSystem(
        _settings(
            tmp_path, default_partition="gpuq", partition_overrides={"workq": {"slot_type": "cpu"}}
        ),
        PbsClient(pbs.runner, options=PbsOptions()),
    )
    pools = {p.name: p for p in system.partitions()}
    assert [n for n, p in pools.items() if p.default] == ["gpuq"]
    assert (pools["workq"].slot_type, pools["workq"].slots, pools["workq"].idle_slots) == (
        "cpu",
        40,
        38,
    )
    assert pbs.runner.count("qstat") == 1


def test_pbs_system_counts_gpus_with_gpu_resource(tmp_path: Path) -> None:
    pbs = FakePbs(
        queues={"gpuq": PbsQueueRow()},
        nodes={"gn1": PbsNodeRow(ngpus=2)},
        gpu_resource="gpus",
    )
    default = PbsSystem(_settings(tmp_path), PbsClient(pbs.runner))
    assert default.partitions()[0].slot_type == "cpu"  # ngpus: not on these nodes
    system = PbsSystem(_settings(tmp_path, gpu_resource="gpus"))
    system.client.runner = pbs.runner
    (pool,) = system.partitions()
    assert (pool.slot_type, pool.slots) == ("cuda", 2)


def test_fake_qsub_checks_queues_like_pbs(tmp_path: Path) -> None:
    pbs = FakePbs(queues={"workq": PbsQueueRow(), "off": PbsQueueRow(enabled=False)})
    client = PbsClient(pbs.runner)
    job = client.submit(_request(tmp_path, "a1"))
    assert pbs.jobs[job].queue == "workq"  # no -q: the default queue
    with pytest.raises(HpcCommandError, match="Unknown queue"):
        client.submit(_request(tmp_path, "a2", partition="nosuch"))
    with pytest.raises(HpcCommandError, match="Queue is not enabled"):
        client.submit(_request(tmp_path, "a3", partition="off"))
    (queue,) = [q for q in client.queues() if q.name == "workq"]
    assert queue.enabled
