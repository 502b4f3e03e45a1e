"""Parsers for the output of the commands in :mod:`stalwart.hpc.slurm.commands`.

Contract: pure functions over text, tested against output captured from a real Slurm 22.05
(``tests/slurm/fixtures``). Malformed lines raise :class:`SlurmParseError` naming the line;
blank lines are skipped. Job ids are kept as strings (``"42"``, ``"42_3"`` for array tasks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stalwart.hpc.slurm.commands import SACCT_FIELDS, SINFO_FIELDS, SQUEUE_FIELDS
from stalwart.hpc.states import JobStatus, slurm_job_status

__all__ = [
    "SacctRecord",
    "SinfoNode",
    "SlurmParseError",
    "SqueueRecord",
    "parse_gres",
    "parse_sacct",
    "parse_sbatch",
    "parse_scontrol",
    "parse_sinfo",
    "parse_squeue",
]


class SlurmParseError(ValueError):
    """Output that does not have the expected shape (a Slurm version or format mismatch)."""


def _null(value: str) -> str:
    value = value.strip()
    return "" if value in ("(null)", "N/A", "None", "Unknown") else value


_SBATCH = re.compile(r"^\s*(?:Submitted batch job\s+)?(\d+)(?:;\S+)?\s*$")


def parse_sbatch(output: str) -> str:
    """The job id from ``sbatch --parsable`` (``"42"``, ``"42;cluster"``) or plain sbatch."""
    for line in output.splitlines():
        match = _SBATCH.match(line)
        if match:
            return match.group(1)
    raise SlurmParseError(f"no job id in sbatch output {output.strip()!r}")


@dataclass(frozen=True)
class SqueueRecord:
    """One job as squeue shows it (:data:`~stalwart.hpc.slurm.commands.SQUEUE_FIELDS`)."""

    job_id: str
    state: str
    reason: str
    restarts: int
    partition: str
    nodes: int
    node_list: str
    submit_time: str
    start_time: str
    time_limit: str
    name: str

    @property
    def status(self) -> JobStatus:
        """The job's state in Stalwart's words (no exit code: squeue does not show it)."""
        return slurm_job_status(self.state, self.reason)


def _split(line: str, count: int, what: str) -> list[str]:
    parts = line.split("|", count - 1)
    if len(parts) != count:
        raise SlurmParseError(f"{what}: expected {count} '|'-separated columns in {line!r}")
    return parts


def _int(value: str, line: str, what: str) -> int:
    value = value.strip()
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        raise SlurmParseError(f"{what}: {value!r} is not a number in {line!r}") from None


def parse_squeue(output: str) -> list[SqueueRecord]:
    """Rows of ``squeue_argv()`` output, in order."""
    rows = []
    for line in output.splitlines():
        if not line.strip():
            continue
        p = _split(line, len(SQUEUE_FIELDS), "squeue")
        rows.append(
            SqueueRecord(
                job_id=p[0].strip(),
                state=p[1].strip(),
                reason=_null(p[2]),
                restarts=_int(p[3], line, "squeue"),
                partition=p[4].strip(),
                nodes=_int(p[5], line, "squeue"),
                node_list=_null(p[6]),
                submit_time=_null(p[7]),
                start_time=_null(p[8]),
                time_limit=_null(p[9]),
                name=p[10].rstrip("\n"),
            )
        )
    return rows


@dataclass(frozen=True)
class SacctRecord:
    """One job allocation as sacct shows it (:data:`~stalwart.hpc.slurm.commands.SACCT_FIELDS`)."""

    job_id: str
    state: str
    exit_code: str
    partition: str
    nodes: int
    node_list: str
    start: str
    end: str
    elapsed: str
    name: str

    @property
    def status(self) -> JobStatus:
        """The job's state in Stalwart's words, exit code included."""
        return slurm_job_status(self.state, "", self.exit_code)


def parse_sacct(output: str) -> list[SacctRecord]:
    """Rows of ``sacct_argv()`` output; step rows (``42.batch``) are skipped if present."""
    rows = []
    for line in output.splitlines():
        if not line.strip():
            continue
        p = _split(line, len(SACCT_FIELDS), "sacct")
        if "." in p[0]:
            continue
        rows.append(
            SacctRecord(
                job_id=p[0].strip(),
                state=p[1].strip(),
                exit_code=p[2].strip(),
                partition=p[3].strip(),
                nodes=_int(p[4], line, "sacct"),
                node_list=_null(p[5]),
                start=_null(p[6]),
                end=_null(p[7]),
                elapsed=p[8].strip(),
                name=p[9],
            )
        )
    return rows


@dataclass(frozen=True)
class SinfoNode:
    """One node in one partition (:data:`~stalwart.hpc.slurm.commands.SINFO_FIELDS`).

    ``gpus``: GPUs on the node from its GRES (``gpu:a100:4(S:0-1)`` -> 4); ``gpu_types`` their
    types; ``cpus_alloc``/``cpus_idle``: from ``%C``.
    """

    node: str
    partition: str
    default: bool
    cpus: int
    memory_mb: int
    gres: str
    state: str
    time_limit: str
    cpus_alloc: int
    cpus_idle: int
    gpus: int
    gpu_types: tuple[str, ...]

    @property
    def usable(self) -> bool:
        """The node can take new jobs: idle, mixed, allocated or completing (not down, drained,
        failing, powered off or in maintenance; ``*`` (not responding) also counts as down)."""
        state = self.state.lower()
        if "*" in state:
            return False
        base = state.rstrip("~#!%$@^-+")
        return base in ("idle", "mixed", "allocated", "completing", "planned")


_GRES_ITEM = re.compile(r"^([^:(]+)(?::([^:(]+))?(?::(\d+))?(?:\(.*\))?$")


def parse_gres(gres: str) -> dict[str, dict[str, int]]:
    """``"gpu:a100:4(S:0-1),gpu:v100:2,nic:1"`` -> ``{"gpu": {"a100": 4, "v100": 2}, "nic":
    {"": 1}}``; ``"(null)"`` -> ``{}``. An untyped count is under the type ``""``."""
    out: dict[str, dict[str, int]] = {}
    value = _null(gres)
    if not value:
        return out
    for item in re.split(r",(?![^()]*\))", value):
        item = item.strip()
        match = _GRES_ITEM.match(item)
        if not match:
            raise SlurmParseError(f"GRES {item!r} in {gres!r} is not name[:type][:count]")
        name, kind, count = match.group(1), match.group(2) or "", match.group(3)
        if count is None and kind.isdigit():
            kind, count = "", kind
        out.setdefault(name, {})
        out[name][kind] = out[name].get(kind, 0) + int(count or 1)
    return out


def parse_sinfo(output: str) -> list[SinfoNode]:
    """Rows of ``sinfo_argv()`` output."""
    rows = []
    for line in output.splitlines():
        if not line.strip():
            continue
        p = _split(line, len(SINFO_FIELDS), "sinfo")
        alloc, idle = 0, 0
        cpu_counts = p[7].strip().split("/")
        if len(cpu_counts) == 4:
            alloc, idle = (_int(v, line, "sinfo") for v in cpu_counts[:2])
        gres = parse_gres(p[4])
        gpus = gres.get("gpu", {})
        partition = p[1].strip()
        rows.append(
            SinfoNode(
                node=p[0].strip(),
                partition=partition.rstrip("*"),
                default=partition.endswith("*"),
                cpus=_int(p[2], line, "sinfo"),
                memory_mb=_int(p[3].rstrip("+"), line, "sinfo"),
                gres=_null(p[4]),
                state=p[5].strip(),
                time_limit=p[6].strip(),
                cpus_alloc=alloc,
                cpus_idle=idle,
                gpus=sum(gpus.values()),
                gpu_types=tuple(sorted(k for k in gpus if k)),
            )
        )
    return rows


_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_scontrol(output: str) -> list[dict[str, str]]:
    """``scontrol --oneliner show job`` output: one ``{key: value}`` per job line.

    Values run to the next `` Key=``, so values with spaces (``Command``, ``WorkDir``) survive.
    """
    jobs = []
    for line in output.splitlines():
        if not line.strip():
            continue
        matches = list(_KEY.finditer(line))
        if not matches or matches[0].group(1) != "JobId":
            raise SlurmParseError(f"scontrol: a job line starts with JobId=, not {line[:40]!r}")
        record: dict[str, str] = {}
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            record[match.group(1)] = line[match.end() : end].strip()
        jobs.append(record)
    return jobs
