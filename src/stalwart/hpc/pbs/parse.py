"""PBS (OpenPBS / PBS Pro; Torque's ``qstat -f`` too) commands, parsers and job states.

Contract: pure. The samples these are tested on (``tests/slurm/fixtures/pbs_*``) were written
by hand from the OpenPBS documentation and source (``qstat -f -F json``, ``qstat -f``, exit
codes from ``job.h``), not captured from a real PBS: no PBS server runs in our CI. Treat them as
our best reading until someone captures real ones.

States (``job_state``): Q queued, H held, W waiting for its start time, T/M moving, B array
started, S/U suspended, R running, E exiting, F finished (``qstat -x``), C completed (Torque).
A finished job's ``Exit_status``: 0 success; > 256 killed by signal ``status - 256`` (``qdel``
of a running job: 271 = SIGTERM); negative values are PBS's own ``JOB_EXEC_*`` codes (-29
walltime exceeded, -27 memory exceeded, -20 lost contact with the node...). ``substate`` 91
(terminated) marks a job deleted with ``qdel`` before it ran.

Queues and nodes (for resource pools, :mod:`stalwart.hpc.pbs.queues`): ``qstat -Q -f -F json``
(``{"Queue": {name: {queue_type, enabled, started, resources_max, resources_default,
default_chunk, hasnodes...}}}``), ``pbsnodes -a -F json`` (``{"nodes": {name: {state,
resources_available, resources_assigned, queue...}}}``) and ``qstat -B -f -F json``
(``{"Server": {name: {default_queue...}}}``), in the shape OpenPBS 20-23 prints: booleans are the
strings ``"True"``/``"False"``, sizes strings such as ``"394GB"`` or ``"8009724kb"``, counts
integers (or numeric strings). Hand-written samples as well (``tests/slurm/fixtures/pbs_*``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stalwart.hpc.states import JobStatus, Outcome

__all__ = [
    "PbsJob",
    "PbsNode",
    "PbsParseError",
    "PbsQueue",
    "parse_pbsnodes_json",
    "parse_qstat_full",
    "parse_qstat_json",
    "parse_qstat_queues_json",
    "parse_qstat_server_json",
    "parse_qsub",
    "parse_size_mb",
    "pbs_job_status",
    "pbsnodes_argv",
    "qdel_argv",
    "qstat_argv",
    "qstat_queues_argv",
    "qstat_server_argv",
    "qsub_argv",
]


class PbsParseError(ValueError):
    """Output that does not have the expected shape."""


def qsub_argv(script_path: str) -> list[str]:
    """Submit a script; qsub prints the job id (``101.server``)."""
    return ["qsub", script_path]


def qstat_argv(job_ids: Iterable[str] = ()) -> list[str]:
    """Full records, finished jobs included (``-x``), as JSON; all jobs when no ids are given."""
    return ["qstat", "-x", "-f", "-F", "json", *job_ids]


def qdel_argv(job_ids: Iterable[str]) -> list[str]:
    """Delete every job in ``job_ids`` in one call."""
    return ["qdel", *job_ids]


def qstat_queues_argv() -> list[str]:
    """Every queue's full status, as JSON."""
    return ["qstat", "-Q", "-f", "-F", "json"]


def qstat_server_argv() -> list[str]:
    """The server's full status (its ``default_queue``), as JSON."""
    return ["qstat", "-B", "-f", "-F", "json"]


def pbsnodes_argv() -> list[str]:
    """Every node (vnode), as JSON."""
    return ["pbsnodes", "-a", "-F", "json"]


_QSUB = re.compile(r"^\s*(\d+(?:\[\d*\])?(?:\.[\w.-]+)?)\s*$")


def parse_qsub(output: str) -> str:
    """The job id qsub printed (``"101.pbs-head"``)."""
    for line in output.splitlines():
        match = _QSUB.match(line)
        if match:
            return match.group(1)
    raise PbsParseError(f"no job id in qsub output {output.strip()!r}")


@dataclass(frozen=True)
class PbsJob:
    """One PBS job's fields that matter to Stalwart."""

    job_id: str
    name: str
    state: str
    substate: int | None
    queue: str
    exit_status: int | None
    comment: str
    run_count: int

    @property
    def status(self) -> JobStatus:
        """The job's state in Stalwart's words."""
        return pbs_job_status(self.state, self.exit_status, self.substate, self.comment)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _job(job_id: str, fields: Mapping[str, Any]) -> PbsJob:
    exit_status = fields.get("Exit_status", fields.get("exit_status"))
    return PbsJob(
        job_id=job_id,
        name=str(fields.get("Job_Name", "")),
        state=str(fields.get("job_state", "")),
        substate=_int(fields.get("substate")),
        queue=str(fields.get("queue", "")),
        exit_status=_int(exit_status),
        comment=str(fields.get("comment", "")),
        run_count=_int(fields.get("run_count")) or 0,
    )


def parse_qstat_json(output: str) -> list[PbsJob]:
    """``qstat -f -F json`` output (``{"Jobs": {id: {...}}}``; no ``Jobs`` key: no jobs)."""
    try:
        document = json.loads(output)
    except json.JSONDecodeError as exc:
        raise PbsParseError(f"qstat JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PbsParseError("qstat JSON: the document is not an object")
    jobs = document.get("Jobs") or {}
    if not isinstance(jobs, dict):
        raise PbsParseError("qstat JSON: 'Jobs' is not an object")
    return [_job(job_id, fields) for job_id, fields in jobs.items()]


def parse_qstat_full(output: str) -> list[PbsJob]:
    """``qstat -f`` text: ``Job Id: X`` then ``key = value`` lines; a line that starts with a
    tab continues the previous value."""
    jobs: list[PbsJob] = []
    current: str | None = None
    fields: dict[str, str] = {}
    key: str | None = None
    for raw in output.splitlines():
        if raw.startswith("Job Id:"):
            if current is not None:
                jobs.append(_job(current, fields))
            current, fields, key = raw.split(":", 1)[1].strip(), {}, None
        elif raw.startswith("\t") and key is not None:
            fields[key] += raw.strip()
        elif " = " in raw and current is not None:
            name, _, value = raw.strip().partition(" = ")
            key = name.strip()
            fields[key] = value.strip()
        elif raw.strip() and current is None:
            raise PbsParseError(f"qstat -f: expected 'Job Id:' before {raw[:40]!r}")
    if current is not None:
        jobs.append(_job(current, fields))
    return jobs


_QUEUED: dict[str, tuple[str, bool]] = {
    "Q": ("waiting to be scheduled", False),
    "H": ("held (release it with qrls)", True),
    "W": ("waiting for its start time", False),
    "T": ("being moved to another server", False),
    "M": ("moved to another server", False),
}
_LIVE = {
    "B": ("RUNNING", "array job started"),
    "R": ("RUNNING", "running"),
    "S": ("RUNNING", "suspended by PBS"),
    "U": ("RUNNING", "suspended (the node is busy)"),
    "E": ("TERMINATING", "exiting"),
}
_EXEC_CODES: dict[int, tuple[Outcome, str]] = {
    -1: (Outcome.FAILED, "could not be started by PBS"),
    -2: (Outcome.FAILED, "could not be started by PBS"),
    -3: (Outcome.NODE_FAILED, "failed to start; PBS will retry"),
    -10: (Outcome.FAILED, "failed: its user or group is not valid on the node"),
    -11: (Outcome.PREEMPTED, "requeued by PBS"),
    -20: (Outcome.NODE_FAILED, "PBS lost contact with its first node"),
    -24: (Outcome.FAILED, "used more CPUs than requested"),
    -25: (Outcome.FAILED, "used more CPUs than requested"),
    -26: (Outcome.OUT_OF_MEMORY, "used more virtual memory than requested"),
    -27: (Outcome.OUT_OF_MEMORY, "used more memory than requested"),
    -28: (Outcome.TIMED_OUT, "used more CPU time than requested"),
    -29: (Outcome.TIMED_OUT, "reached its walltime and was killed"),
}


def pbs_job_status(
    state: str, exit_status: int | None = None, substate: int | None = None, comment: str = ""
) -> JobStatus:
    """Map one PBS job to a :class:`~stalwart.hpc.states.JobStatus` (see the module docs)."""
    letter = state.strip().upper()[:1]
    note = comment.strip()
    if letter in _QUEUED:
        text, stuck = _QUEUED[letter]
        if note.startswith("Not Running:"):
            why = note.removeprefix("Not Running:").strip()
            text = why if letter == "Q" else f"{text}; {why}"
        return JobStatus(letter, "ASSIGNED", f"queued: {text}", stuck=stuck)
    if letter in _LIVE:
        alloc_state, text = _LIVE[letter]
        return JobStatus(letter, "RUNNING" if alloc_state == "RUNNING" else "TERMINATING", text)
    if letter not in ("F", "X", "C"):
        return JobStatus(letter, None, f"unknown PBS state {state.strip()!r}")

    def end(outcome: Outcome, text: str, signal: int | None = None) -> JobStatus:
        infra = outcome in (Outcome.NODE_FAILED, Outcome.PREEMPTED)
        return JobStatus(
            letter,
            "TERMINATED",
            text,
            outcome=outcome,
            exit_code=exit_status,
            signal=signal,
            infrastructure=infra,
        )

    if substate == 91 and exit_status is None:
        return end(Outcome.CANCELED, "deleted (qdel) before it ran")
    if exit_status is None:
        return end(Outcome.CANCELED, "ended without an exit status (deleted before it ran)")
    if exit_status == 0:
        return end(Outcome.SUCCEEDED, "completed")
    if exit_status in _EXEC_CODES:
        outcome, text = _EXEC_CODES[exit_status]
        return end(outcome, text)
    if exit_status < 0:
        return end(Outcome.FAILED, f"could not be run by PBS (code {exit_status})")
    if exit_status > 256:
        signal = exit_status - 256
        if signal in (9, 15):
            return end(Outcome.CANCELED, f"killed by signal {signal} (qdel)", signal)
        return end(Outcome.FAILED, f"failed: killed by signal {signal}", signal)
    return end(Outcome.FAILED, f"failed: exited with code {exit_status}")


# -- queues, nodes, server ------------------------------------------------------------------


@dataclass(frozen=True)
class PbsQueue:
    """One queue of ``qstat -Q -f -F json``: what shapes a resource pool.

    ``queue_type``: ``Execution`` or ``Route`` (as PBS spells it); ``qlist``: its
    ``default_chunk.Qlist`` (jobs then only fit nodes listing that value in their ``Qlist``);
    ``walltime_max``: ``resources_max.walltime`` (empty: none); ``resources_max`` and
    ``resources_default``: the rest of those, as strings."""

    name: str
    queue_type: str
    enabled: bool
    started: bool
    qlist: str | None = None
    walltime_max: str = ""
    resources_max: tuple[tuple[str, str], ...] = ()
    resources_default: tuple[tuple[str, str], ...] = ()

    @property
    def execution(self) -> bool:
        """Jobs run from it (a routing queue only sends them on)."""
        return self.queue_type.strip().lower().startswith("e")


@dataclass(frozen=True)
class PbsNode:
    """One (v)node of ``pbsnodes -a -F json``.

    ``states``: its comma-separated ``state`` (``free``, ``job-busy``, ``down,offline``...);
    ``queue``: the queue it is bound to with its ``queue`` attribute (it serves no other);
    ``qlist``: its ``resources_available.Qlist`` values; ``gpus``/``gpus_assigned``: the
    GPU resource (``ngpus`` unless told) available and assigned."""

    name: str
    states: tuple[str, ...]
    cpus: int
    cpus_assigned: int
    gpus: int
    gpus_assigned: int
    memory_mb: int
    queue: str | None = None
    qlist: tuple[str, ...] = ()


def _document(output: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(output)
    except json.JSONDecodeError as exc:
        raise PbsParseError(f"{what} JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PbsParseError(f"{what} JSON: the document is not an object")
    return document


def _section(document: Mapping[str, Any], key: str, what: str) -> dict[str, Any]:
    section = document.get(key) or {}
    if not isinstance(section, dict):
        raise PbsParseError(f"{what} JSON: {key!r} is not an object")
    return section


def _bool(value: Any, default: bool = False) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return default
    return str(value).strip().lower() in ("true", "t", "y", "yes", "1")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int:
    """An integer resource (``4``, ``"4"``); 0 when absent or not a number."""
    number = _int(value)
    return max(0, number) if number is not None else 0


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)(b|w)?\s*$", re.I)
_SCALE = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size_mb(value: Any) -> int:
    """A PBS size (``"8009724kb"``, ``"394GB"``, ``"0b"``, ``"2mw"``: words are 8 bytes; a
    bare number is bytes) in MiB, rounded down; 0 when absent or unreadable."""
    match = _SIZE.match(str(value)) if value is not None else None
    if match is None:
        return 0
    number, prefix, unit = match.groups()
    size: int = int(number) * 1024 ** _SCALE[prefix.lower()]
    if (unit or "b").lower() == "w":
        size *= 8
    return size // (1024 * 1024)


def _list(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    elif value is None:
        items = []
    else:
        items = str(value).split(",")
    return tuple(item.strip() for item in items if item.strip())


def _strings(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in _mapping(value).items()))


def parse_qstat_queues_json(output: str) -> list[PbsQueue]:
    """``qstat -Q -f -F json`` (``{"Queue": {name: {...}}}``; no ``Queue`` key: no queues), in
    the server's order. A queue without ``enabled``/``started`` counts as neither."""
    queues = _section(_document(output, "qstat -Q"), "Queue", "qstat -Q")
    out = []
    for name, raw in queues.items():
        fields = _mapping(raw)
        chunk = _mapping(fields.get("default_chunk"))
        qlist = chunk.get("Qlist")
        maximum = _mapping(fields.get("resources_max"))
        out.append(
            PbsQueue(
                name=str(name),
                queue_type=str(fields.get("queue_type", "")),
                enabled=_bool(fields.get("enabled")),
                started=_bool(fields.get("started")),
                qlist=str(qlist).strip() if qlist not in (None, "") else None,
                walltime_max=str(maximum.get("walltime", "")),
                resources_max=_strings(maximum),
                resources_default=_strings(fields.get("resources_default")),
            )
        )
    return out


def parse_pbsnodes_json(output: str, gpu_resource: str = "ngpus") -> list[PbsNode]:
    """``pbsnodes -a -F json`` (``{"nodes": {name: {...}}}``; no ``nodes`` key: no nodes);
    ``gpu_resource``: the resource that counts GPUs."""
    nodes = _section(_document(output, "pbsnodes"), "nodes", "pbsnodes")
    out = []
    for name, raw in nodes.items():
        fields = _mapping(raw)
        available = _mapping(fields.get("resources_available"))
        assigned = _mapping(fields.get("resources_assigned"))
        queue = fields.get("queue")
        out.append(
            PbsNode(
                name=str(name),
                states=_list(str(fields.get("state", "")).lower()),
                cpus=_count(available.get("ncpus", fields.get("pcpus"))),
                cpus_assigned=_count(assigned.get("ncpus")),
                gpus=_count(available.get(gpu_resource)),
                gpus_assigned=_count(assigned.get(gpu_resource)),
                memory_mb=parse_size_mb(available.get("mem")),
                queue=str(queue).strip() if queue not in (None, "") else None,
                qlist=_list(available.get("Qlist")),
            )
        )
    return out


def parse_qstat_server_json(output: str) -> str | None:
    """The ``default_queue`` of ``qstat -B -f -F json`` (``{"Server": {name: {...}}}``: the
    first server's); None when unset."""
    servers = _section(_document(output, "qstat -B"), "Server", "qstat -B")
    for raw in servers.values():
        queue = _mapping(raw).get("default_queue")
        return str(queue).strip() or None if queue is not None else None
    return None
