"""sbatch_args: forbidden options in every spelling are rejected with a clear message."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.slurm.args import FORBIDDEN_LONG, FORBIDDEN_SHORT, sbatch_directives


@pytest.mark.parametrize(
    "args",
    [
        ["--nodes=2"],
        ["--nodes", "2"],
        ["--nodes 2"],
        ["-N2"],
        ["-N", "2"],
        ["-N 2"],
        ["--ntasks=4"],
        ["-n4"],
        ["--ntasks-per-node=2"],
        ["--gpus=4"],
        ["-G", "4"],
        ["--gpus-per-node=a100:4"],
        ["--gres=gpu:2"],
        ["--gres=gpu:a100:2,nic:1"],
        ["--partition=long"],
        ["-p", "long"],
        ["-plong"],
        ["--part=long"],
        ["--output=/tmp/x"],
        ["-o", "/tmp/x"],
        ["--error=/tmp/x"],
        ["-e/tmp/x"],
        ["--chdir=/tmp"],
        ["-D", "/tmp"],
        ["--requeue"],
        ["--no-requeue"],
        ["--job-name=mine"],
        ["-J", "mine"],
        ["--array=1-3"],
        ["-vN2"],
    ],
)
def test_forbidden_options_are_rejected(args: list[str]) -> None:
    with pytest.raises(SchedulerArgsError) as caught:
        sbatch_directives(args)
    assert caught.value.code == "invalid_scheduler_args"
    assert "slurm.sbatch_args" in str(caught.value)
    assert "is not allowed" in str(caught.value) or "GPUs come from" in str(caught.value)


def test_every_problem_is_reported_at_once_with_what_to_do() -> None:
    with pytest.raises(SchedulerArgsError) as caught:
        sbatch_directives(["--mem=4G", "-N2", "--partition=x", "--time=60", "-o", "out.txt"])
    problems = caught.value.problems
    assert len(problems) == 3
    assert "slots_per_trial" in problems[0]
    assert "resources.resource_pool" in problems[1]
    assert "job_storage_root" in problems[2]


def test_prefix_spelling_names_the_full_option() -> None:
    with pytest.raises(SchedulerArgsError, match=r"--part means --partition"):
        sbatch_directives(["--part=long"])


@pytest.mark.parametrize(
    ("args", "lines"),
    [
        (["--mem=10G"], ["#SBATCH --mem=10G"]),
        (["--mem", "10G"], ["#SBATCH --mem 10G"]),
        (["-t 60", "--exclusive"], ["#SBATCH -t 60", "#SBATCH --exclusive"]),
        (["--gres=nic:1"], ["#SBATCH --gres=nic:1"]),
        (["--nodelist=n[1-2]"], ["#SBATCH --nodelist=n[1-2]"]),
        (["--ntasks-per-core=1", "--nice=5"], ["#SBATCH --ntasks-per-core=1", "#SBATCH --nice=5"]),
        (["--comment=hello world"], ["#SBATCH --comment=hello world"]),
        (['--comment="hello world"'], ['#SBATCH --comment="hello world"']),
        (["--account=proj", "-c", "8"], ["#SBATCH --account=proj", "#SBATCH -c 8"]),
    ],
)
def test_allowed_options_become_directives(args: list[str], lines: list[str]) -> None:
    assert sbatch_directives(args) == lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["10G"], "is not an option"),
        (["--mem=1\n#SBATCH -N 4"], "line break"),
        (['--comment="x'], "No closing quotation"),
        (["--comment='a\"b c'"], "double quote"),
    ],
)
def test_malformed_arguments_are_rejected(args: list[str], message: str) -> None:
    with pytest.raises(SchedulerArgsError, match=message):
        sbatch_directives(args)


_SPELLINGS = st.sampled_from(sorted(FORBIDDEN_LONG)).flatmap(
    lambda name: st.sampled_from([f"--{name}=1", f"--{name} 1", f"--{name}"])
) | st.sampled_from(sorted(FORBIDDEN_SHORT)).flatmap(
    lambda letter: st.sampled_from([f"-{letter}1", f"-{letter} 1", f"-v{letter}1"])
)
_ALLOWED = st.sampled_from(["--mem=4G", "--exclusive", "-t 60", "--account=a", "--qos=high"])


@given(st.lists(_ALLOWED, max_size=3), _SPELLINGS, st.lists(_ALLOWED, max_size=3))
def test_a_forbidden_option_anywhere_is_rejected(
    before: list[str], bad: str, after: list[str]
) -> None:
    with pytest.raises(SchedulerArgsError) as caught:
        sbatch_directives([*before, bad, *after])
    assert len(caught.value.problems) == 1
