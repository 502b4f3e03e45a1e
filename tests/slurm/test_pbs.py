"""PBS: qsub scripts, pbsbatch_args checks, qstat parsers and states (hand-written samples)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import PurePosixPath

import pytest

from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.pbs import (
    parse_qstat_full,
    parse_qstat_json,
    pbs_directives,
    pbs_job_status,
    render_qsub_script,
)
from stalwart.hpc.pbs.parse import PbsParseError, parse_qsub, qdel_argv, qstat_argv, qsub_argv
from stalwart.hpc.states import Outcome
from tests.slurm.conftest import fixture_text

BASE = BatchRequest(
    allocation_id="a101",
    slots=8,
    slot_type="cuda",
    slots_per_node=4,
    command=("python3", "-m", "stalwart.exec.launch"),
    job_storage_root=PurePosixPath("/shared/jobs"),
    partition="gpuq",
    env=(("STALWART_MASTER", "http://login:8080"),),
    time_limit=timedelta(hours=30),
)


def pbs_lines(script: str) -> list[str]:
    return [line.removeprefix("#PBS ") for line in script.splitlines() if line.startswith("#PBS")]


def test_multi_node_gpu_script_runs_one_launcher_per_node() -> None:
    script = render_qsub_script(replace(BASE, scheduler_args=("-l walltime=1:00:00", "-P proj")))
    assert pbs_lines(script) == [
        "-N stalwart-a101",
        "-q gpuq",
        "-l select=2:ncpus=1:ngpus=4:mpiprocs=1",
        "-l place=scatter",
        "-l walltime=30:00:00",
        "-o /shared/jobs/a101/pbs.out",
        "-e /shared/jobs/a101/pbs.err",
        "-r y",
        "-l walltime=1:00:00",
        "-P proj",
    ]
    assert script.splitlines()[-1] == (
        "exec pbsdsh -u -- /usr/bin/env STALWART_ALLOCATION_ID=a101 "
        "STALWART_MASTER=http://login:8080 python3 -m stalwart.exec.launch"
    )


def test_single_node_cpu_script_exports_and_execs() -> None:
    request = replace(BASE, slot_type="cpu", slots=4, slots_per_node=None, requeue=False)
    script = render_qsub_script(request)
    assert "-l select=1:ncpus=4:mpiprocs=1" in pbs_lines(script)
    assert "-r n" in pbs_lines(script)
    assert "export STALWART_MASTER=http://login:8080" in script
    assert script.splitlines()[-1] == "exec python3 -m stalwart.exec.launch"


@pytest.mark.parametrize(
    "arg",
    [
        "-N name",
        "-q long",
        "-o out",
        "-e err",
        "-j oe",
        "-r y",
        "-J 1-4",
        "-l select=2:ngpus=4",
        "-lselect=1",
        "-l nodes=2",
        "-l ngpus=4,walltime=1:00:00",
        "-l place=pack",
    ],
)
def test_forbidden_pbs_args_are_rejected(arg: str) -> None:
    with pytest.raises(SchedulerArgsError, match=r"pbs\.pbsbatch_args"):
        pbs_directives([arg])


def test_allowed_pbs_args_pass_through() -> None:
    assert pbs_directives(["-p1000", "-PMyProject", "-l walltime=1:00:00", "-A", "acct"]) == [
        "#PBS -p1000",
        "#PBS -PMyProject",
        "#PBS -l walltime=1:00:00",
        "#PBS -A acct",
    ]


def test_qstat_json_sample() -> None:
    jobs = {
        job.job_id: job for job in parse_qstat_json(fixture_text("pbs_qstat_x_f_json.sample.json"))
    }
    assert len(jobs) == 8
    expected = {
        "101.pbs-head": ("ASSIGNED", None),
        "102.pbs-head": ("RUNNING", None),
        "103.pbs-head": ("ASSIGNED", None),
        "104.pbs-head": ("TERMINATED", Outcome.SUCCEEDED),
        "105.pbs-head": ("TERMINATED", Outcome.FAILED),
        "106.pbs-head": ("TERMINATED", Outcome.CANCELED),
        "107.pbs-head": ("TERMINATED", Outcome.TIMED_OUT),
        "108.pbs-head": ("TERMINATED", Outcome.CANCELED),
    }
    for job_id, (state, outcome) in expected.items():
        status = jobs[job_id].status
        assert (status.allocation_state, status.outcome) == (state, outcome), job_id
    assert jobs["101.pbs-head"].status.reason == (
        "queued: Insufficient amount of resource: ngpus (R: 8 A: 4 T: 8)"
    )
    assert jobs["103.pbs-head"].status.stuck
    assert jobs["105.pbs-head"].status.reason == "failed: exited with code 3"
    assert jobs["102.pbs-head"].run_count == 1


def test_qstat_full_text_sample_joins_continuation_lines() -> None:
    jobs = parse_qstat_full(fixture_text("pbs_qstat_f.sample.txt"))
    assert [j.job_id for j in jobs] == ["102.pbs-head", "105.pbs-head"]
    assert jobs[0].comment.endswith("(gpu01:ncpus=1:ngpus=4)")
    assert jobs[1].exit_status == 3


@pytest.mark.parametrize(
    ("exit_status", "outcome", "signal"),
    [
        (0, Outcome.SUCCEEDED, None),
        (1, Outcome.FAILED, None),
        (265, Outcome.CANCELED, 9),
        (267, Outcome.FAILED, 11),
        (-29, Outcome.TIMED_OUT, None),
        (-27, Outcome.OUT_OF_MEMORY, None),
        (-20, Outcome.NODE_FAILED, None),
        (-99, Outcome.FAILED, None),
    ],
)
def test_finished_pbs_exit_statuses(exit_status: int, outcome: Outcome, signal: int | None) -> None:
    status = pbs_job_status("F", exit_status, 92)
    assert status.outcome == outcome
    assert status.signal == signal


def test_pbs_live_and_unknown_states() -> None:
    assert pbs_job_status("E").allocation_state == "TERMINATING"
    assert pbs_job_status("S").allocation_state == "RUNNING"
    assert pbs_job_status("W").allocation_state == "ASSIGNED"
    assert pbs_job_status("Z").allocation_state is None


def test_qsub_output_and_argv() -> None:
    assert parse_qsub(fixture_text("pbs_qsub.sample.txt")) == "101.pbs-head"
    assert parse_qsub("12[].server\n") == "12[].server"
    with pytest.raises(PbsParseError):
        parse_qsub("qsub: Unknown queue\n")
    assert qsub_argv("/s/job.pbs") == ["qsub", "/s/job.pbs"]
    assert qstat_argv(["1.s", "2.s"]) == ["qstat", "-x", "-f", "-F", "json", "1.s", "2.s"]
    assert qdel_argv(["1.s"]) == ["qdel", "1.s"]


def test_bad_qstat_documents() -> None:
    with pytest.raises(PbsParseError):
        parse_qstat_json("not json")
    assert parse_qstat_json('{"timestamp": 1}') == []
