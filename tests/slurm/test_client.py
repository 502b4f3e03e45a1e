"""The thin client: argv, error handling, script files (through a replaying runner)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from stalwart.hpc.errors import HpcCommandError, SchedulerArgsError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.runner import ReplayRunner, SubprocessRunner
from stalwart.hpc.slurm import commands
from stalwart.hpc.slurm.client import SlurmClient
from tests.slurm.conftest import fixture_index, fixture_text


def request(tmp_path: Path, **changes: object) -> BatchRequest:
    base = BatchRequest(
        allocation_id="a7",
        slots=2,
        slot_type="cpu",
        command=("true",),
        job_storage_root=PurePosixPath(tmp_path),
    )
    from dataclasses import replace

    return replace(base, **changes)  # type: ignore[arg-type]


def test_submit_writes_the_script_and_returns_the_job_id(tmp_path: Path) -> None:
    runner = ReplayRunner()
    runner.reply("sbatch", fixture_text("sbatch_ok.stdout"))
    job_id = SlurmClient(runner).submit(request(tmp_path))
    assert job_id == fixture_text("sbatch_ok.stdout").strip()
    script = tmp_path / "a7" / "job.sbatch"
    assert script.read_text().startswith("#!/bin/bash")
    assert runner.calls == [("sbatch", "--parsable", str(script))]


def test_slurms_refusal_carries_its_message(tmp_path: Path) -> None:
    runner = ReplayRunner()
    runner.reply("sbatch", "", fixture_text("sbatch_bad_partition.stderr"), 1)
    with pytest.raises(HpcCommandError) as caught:
        SlurmClient(runner).submit(request(tmp_path))
    assert (
        str(caught.value)
        == "sbatch: error: Batch job submission failed: Invalid partition name specified"
    )
    assert not caught.value.retryable
    assert caught.value.code == "hpc_command_failed"


def test_bad_args_fail_before_anything_is_written(tmp_path: Path) -> None:
    runner = ReplayRunner()
    with pytest.raises(SchedulerArgsError):
        SlurmClient(runner).submit(request(tmp_path, scheduler_args=("--nodes=3",)))
    assert runner.calls == []
    assert not (tmp_path / "a7").exists()


def test_cancel_is_one_call_and_tolerates_ended_jobs() -> None:
    runner = ReplayRunner()
    runner.reply(
        "scancel", "", "scancel: error: Kill job error on job id 5: Invalid job id specified\n", 1
    )
    client = SlurmClient(runner)
    client.cancel(["12", "5", "100"])
    assert runner.calls == [("scancel", "5", "12", "100")]
    client.cancel([])
    assert len(runner.calls) == 1
    runner.reply("scancel", "", "scancel: error: Unable to contact slurm controller\n", 1)
    with pytest.raises(HpcCommandError) as caught:
        client.cancel(["5"])
    assert caught.value.retryable


def test_accounting_is_read_once_from_the_config() -> None:
    runner = ReplayRunner()
    runner.reply("scontrol", fixture_text("scontrol_show_config.stdout"))
    runner.reply("sacct", fixture_text("sacct_completion.stdout"))
    client = SlurmClient(runner)
    assert client.finished(["1"])
    assert client.finished(["2"])
    assert runner.count("scontrol") == 1
    assert client.accounting == "jobcomp"
    assert SlurmClient(runner, accounting="none").finished(["1"]) == []


def test_show_job_of_a_forgotten_job_is_none() -> None:
    runner = ReplayRunner()
    runner.reply("scontrol", "", fixture_text("scontrol_show_job_unknown.stderr"), 1)
    assert SlurmClient(runner).show_job("999999") is None


def test_missing_commands_are_retryable_errors() -> None:
    result = SubprocessRunner()(["no-such-command-for-stalwart"], timeout=5)
    assert result.returncode is None
    client = SlurmClient(SubprocessRunner(env={"PATH": "/nonexistent"}))
    with pytest.raises(HpcCommandError) as caught:
        client.squeue()
    assert caught.value.retryable


def test_fixtures_were_captured_with_todays_argv() -> None:
    captured = fixture_index()["commands"]
    assert captured["squeue_mixed"]["argv"] == commands.squeue_argv("root")
    assert captured["sinfo_idle"]["argv"] == commands.sinfo_argv()
    assert (
        captured["sacct_completion"]["argv"][:-1]
        == commands.sacct_argv(["1"], completion=True)[:-1]
    )
