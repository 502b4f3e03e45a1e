"""A fake PBS server for tests: a :class:`~stalwart.hpc.runner.ReplayRunner` answering qsub,
qstat (``-x -f -F json``, the live listing, ``-Q -f -F json`` for queues, ``-B -f -F json`` for
the server), pbsnodes (``-a -F json``) and qdel from dicts the test edits, in the output formats
of OpenPBS (``tests/slurm/fixtures/pbs_*``). The real :class:`~stalwart.hpc.pbs.client.
PbsClient` parses what it prints.

Queues and nodes behave as on a real server once ``queues`` is not empty: ``qsub`` puts a job in
its ``#PBS -q`` queue, else ``default_queue``, and refuses an unknown queue (``Unknown queue``)
or a disabled one (``Queue is not enabled``); ``qstat -Q`` counts each queue's jobs and sets
``hasnodes`` when a node names the queue in its ``queue`` attribute. With no queues configured
(the default) qsub takes any queue, as before this fake knew queues, and ``qstat -Q`` lists none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stalwart.hpc.runner import CommandResult, ReplayRunner

__all__ = ["FakePbs", "PbsJobRow", "PbsNodeRow", "PbsQueueRow"]


@dataclass
class PbsJobRow:
    """One job: its name, ``job_state`` letter, ``Exit_status`` and ``run_count``."""

    name: str
    state: str = "Q"
    exit_status: int | None = None
    run_count: int = 0
    comment: str = ""
    substate: int | None = None
    queue: str = "workq"


@dataclass
class PbsQueueRow:
    """One queue: ``queue_type`` ``Execution`` or ``Route``; ``qlist``: its
    ``default_chunk.Qlist``; ``walltime``: ``resources_max.walltime``."""

    queue_type: str = "Execution"
    enabled: bool = True
    started: bool = True
    qlist: str | None = None
    walltime: str | None = None
    route_destinations: tuple[str, ...] = ()


@dataclass
class PbsNodeRow:
    """One node: ``state`` as pbsnodes prints it (``free``, ``job-busy``, ``down,offline``);
    ``queue``: its ``queue`` attribute; ``qlist``: ``resources_available.Qlist``;
    ``cpus_assigned``/``gpus_assigned``: ``resources_assigned`` (other jobs' use)."""

    ncpus: int = 8
    ngpus: int = 0
    mem: str = "32gb"
    state: str = "free"
    queue: str | None = None
    qlist: tuple[str, ...] = ()
    cpus_assigned: int = 0
    gpus_assigned: int = 0


_JOB_STATES = ("Transit", "Queued", "Held", "Waiting", "Running", "Exiting", "Begun")


@dataclass
class FakePbs:
    """Job ids ``100.pbs-head``, ``101.pbs-head``...; ``reject``: qsub's error, if any;
    ``queues``/``nodes``/``default_queue``: the server's (see the module docstring);
    ``gpu_resource``: the resource pbsnodes counts GPUs with."""

    jobs: dict[str, PbsJobRow] = field(default_factory=dict)
    reject: str | None = None
    scripts: list[str] = field(default_factory=list)
    runner: ReplayRunner = field(default_factory=ReplayRunner)
    queues: dict[str, PbsQueueRow] = field(default_factory=dict)
    nodes: dict[str, PbsNodeRow] = field(default_factory=dict)
    default_queue: str | None = "workq"
    gpu_resource: str = "ngpus"
    down: str | None = None
    """When set, every qstat and pbsnodes fails with this message (the server does not answer)."""

    def __post_init__(self) -> None:
        self.runner.answers["qsub"] = self._qsub
        self.runner.answers["qstat"] = self._qstat
        self.runner.answers["qdel"] = self._qdel
        self.runner.answers["pbsnodes"] = self._pbsnodes

    def _qsub(self, argv: Sequence[str]) -> CommandResult:
        text = Path(argv[-1]).read_text()
        if self.reject:
            return CommandResult(tuple(argv), 1, "", f"qsub: {self.reject}\n")
        lines = text.splitlines()
        named = [ln.split()[-1] for ln in lines if ln.startswith("#PBS -q ")]
        queue = named[-1] if named else (self.default_queue or "workq")
        if self.queues:
            found = self.queues.get(queue)
            if found is None:
                return CommandResult(tuple(argv), 170, "", "qsub: Unknown queue\n")
            if not found.enabled:
                return CommandResult(tuple(argv), 173, "", "qsub: Queue is not enabled\n")
        self.scripts.append(text)
        name = next(ln.split()[-1] for ln in lines if ln.startswith("#PBS -N "))
        job_id = f"{100 + len(self.jobs)}.pbs-head"
        self.jobs[job_id] = PbsJobRow(name, queue=queue)
        return CommandResult(tuple(argv), 0, job_id + "\n", "")

    def _record(self, row: PbsJobRow) -> dict[str, Any]:
        out: dict[str, Any] = {
            "Job_Name": row.name,
            "job_state": row.state,
            "queue": row.queue,
            "run_count": row.run_count,
        }
        if row.exit_status is not None:
            out["Exit_status"] = row.exit_status
        if row.comment:
            out["comment"] = row.comment
        if row.substate is not None:
            out["substate"] = row.substate
        return out

    def _header(self) -> dict[str, Any]:
        return {"timestamp": 1704708000, "pbs_version": "23.06.06", "pbs_server": "pbs-head"}

    def _unreachable(self, argv: Sequence[str]) -> CommandResult | None:
        if self.down is None:
            return None
        return CommandResult(tuple(argv), 2, "", f"{argv[0]}: {self.down}\n")

    def _queue_record(self, name: str, queue: PbsQueueRow) -> dict[str, Any]:
        mine = [r for r in self.jobs.values() if r.queue == name and r.state != "F"]
        letters = {"T": 0, "Q": 1, "H": 2, "W": 3, "R": 4, "E": 5, "B": 6}
        counts = [0] * len(_JOB_STATES)
        for row in mine:
            if row.state in letters:
                counts[letters[row.state]] += 1
        out: dict[str, Any] = {
            "queue_type": queue.queue_type,
            "total_jobs": len(mine),
            "state_count": "".join(f"{k}:{n} " for k, n in zip(_JOB_STATES, counts, strict=True)),
        }
        if queue.walltime:
            out["resources_max"] = {"walltime": queue.walltime}
        if queue.qlist:
            out["default_chunk"] = {"Qlist": queue.qlist}
        if queue.route_destinations:
            out["route_destinations"] = ",".join(queue.route_destinations)
        if queue.queue_type.lower().startswith("e"):
            out["resources_assigned"] = {"mem": "0kb", "ncpus": 0, "nodect": 0}
            if any(n.queue == name for n in self.nodes.values()):
                out["hasnodes"] = "True"
        out["enabled"] = "True" if queue.enabled else "False"
        out["started"] = "True" if queue.started else "False"
        return out

    def _qstat_queues(self, argv: Sequence[str]) -> CommandResult:
        document = self._header()
        if self.queues:
            document["Queue"] = {n: self._queue_record(n, q) for n, q in self.queues.items()}
        return CommandResult(tuple(argv), 0, json.dumps(document, indent=4), "")

    def _qstat_server(self, argv: Sequence[str]) -> CommandResult:
        server: dict[str, Any] = {
            "server_state": "Active",
            "server_host": "pbs-head",
            "scheduling": "True",
            "total_jobs": len(self.jobs),
        }
        if self.default_queue:
            server["default_queue"] = self.default_queue
        server["job_history_enable"] = "True"
        document = {**self._header(), "Server": {"pbs-head": server}}
        return CommandResult(tuple(argv), 0, json.dumps(document, indent=4), "")

    def _pbsnodes(self, argv: Sequence[str]) -> CommandResult:
        failed = self._unreachable(argv)
        if failed is not None:
            return failed
        nodes: dict[str, Any] = {}
        for name, node in self.nodes.items():
            available: dict[str, Any] = {
                "arch": "linux",
                "host": name,
                "mem": node.mem,
                "ncpus": node.ncpus,
                "vnode": name,
            }
            assigned: dict[str, Any] = {"mem": "0kb", "ncpus": node.cpus_assigned, "vmem": "0kb"}
            if node.ngpus:
                available[self.gpu_resource] = node.ngpus
                assigned[self.gpu_resource] = node.gpus_assigned
            if node.qlist:
                available["Qlist"] = ",".join(node.qlist)
            record: dict[str, Any] = {
                "Mom": name,
                "Port": 15002,
                "pbs_version": "23.06.06",
                "ntype": "PBS",
                "state": node.state,
                "pcpus": node.ncpus,
                "resources_available": available,
                "resources_assigned": assigned,
            }
            if node.queue:
                record["queue"] = node.queue
            record.update(resv_enable="True", sharing="default_shared", license="l")
            nodes[name] = record
        if not nodes:
            return CommandResult(tuple(argv), 1, "", "pbsnodes: Server has no node list\n")
        document = {**self._header(), "nodes": nodes}
        return CommandResult(tuple(argv), 0, json.dumps(document, indent=4), "")

    def _qstat(self, argv: Sequence[str]) -> CommandResult:
        failed = self._unreachable(argv)
        if failed is not None:
            return failed
        if "-Q" in argv:
            return self._qstat_queues(argv)
        if "-B" in argv:
            return self._qstat_server(argv)
        ids = [a for a in argv[1:] if not a.startswith("-") and a != "json"]
        history = "-x" in argv
        if ids:
            known = [i for i in ids if i in self.jobs]
            unknown = [i for i in ids if i not in self.jobs]
        else:
            known = [i for i, r in self.jobs.items() if history or r.state not in ("F",)]
            unknown = []
        document = {
            "pbs_version": "22.05.11",
            "pbs_server": "pbs-head",
            "Jobs": {i: self._record(self.jobs[i]) for i in known},
        }
        stderr = "".join(f"qstat: Unknown Job Id {i}\n" for i in unknown)
        return CommandResult(tuple(argv), 153 if unknown else 0, json.dumps(document), stderr)

    def _qdel(self, argv: Sequence[str]) -> CommandResult:
        errors = []
        for job_id in argv[1:]:
            row = self.jobs.get(job_id)
            if row is None:
                errors.append(f"qdel: Unknown Job Id {job_id}")
            elif row.state == "F":
                errors.append(f"qdel: Job has finished {job_id}")
            else:
                ran = row.state == "R"
                row.state, row.exit_status = "F", 271 if ran else None
                row.substate = None if ran else 91
        stderr = "".join(e + "\n" for e in errors)
        return CommandResult(tuple(argv), 35 if errors else 0, "", stderr)
