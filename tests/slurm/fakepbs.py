"""A fake PBS server for tests: a :class:`~stalwart.hpc.runner.ReplayRunner` answering qsub,
qstat (``-x -f -F json``, and the live listing) and qdel from a dict the test edits, in the
output formats of OpenPBS (``tests/slurm/fixtures/pbs_*``). The real :class:`~stalwart.hpc.pbs.
client.PbsClient` parses what it prints."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stalwart.hpc.runner import CommandResult, ReplayRunner

__all__ = ["FakePbs", "PbsJobRow"]


@dataclass
class PbsJobRow:
    """One job: its name, ``job_state`` letter, ``Exit_status`` and ``run_count``."""

    name: str
    state: str = "Q"
    exit_status: int | None = None
    run_count: int = 0
    comment: str = ""
    substate: int | None = None


@dataclass
class FakePbs:
    """Job ids ``100.pbs-head``, ``101.pbs-head``...; ``reject``: qsub's error, if any."""

    jobs: dict[str, PbsJobRow] = field(default_factory=dict)
    reject: str | None = None
    scripts: list[str] = field(default_factory=list)
    runner: ReplayRunner = field(default_factory=ReplayRunner)

    def __post_init__(self) -> None:
        self.runner.answers["qsub"] = self._qsub
        self.runner.answers["qstat"] = self._qstat
        self.runner.answers["qdel"] = self._qdel

    def _qsub(self, argv: Sequence[str]) -> CommandResult:
        text = Path(argv[-1]).read_text()
        if self.reject:
            return CommandResult(tuple(argv), 1, "", f"qsub: {self.reject}\n")
        self.scripts.append(text)
        name = next(ln.split()[-1] for ln in text.splitlines() if ln.startswith("#PBS -N "))
        job_id = f"{100 + len(self.jobs)}.pbs-head"
        self.jobs[job_id] = PbsJobRow(name)
        return CommandResult(tuple(argv), 0, job_id + "\n", "")

    def _record(self, row: PbsJobRow) -> dict[str, Any]:
        out: dict[str, Any] = {
            "Job_Name": row.name,
            "job_state": row.state,
            "queue": "workq",
            "run_count": row.run_count,
        }
        if row.exit_status is not None:
            out["Exit_status"] = row.exit_status
        if row.comment:
            out["comment"] = row.comment
        if row.substate is not None:
            out["substate"] = row.substate
        return out

    def _qstat(self, argv: Sequence[str]) -> CommandResult:
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
