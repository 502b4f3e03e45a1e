"""sbatch scripts and node layouts from allocation requests."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.layout import BatchRequest, plan_layout
from stalwart.hpc.slurm.script import SlurmOptions, format_time_limit, render_sbatch_script

BASE = BatchRequest(
    allocation_id="a1b2.0",
    slots=8,
    slot_type="cuda",
    slots_per_node=4,
    command=("python3", "-m", "stalwart.exec.launch", "--trial", "7"),
    job_storage_root=PurePosixPath("/shared/stalwart"),
    partition="gpu",
    env=(("STALWART_MASTER", "http://login:8080"), ("QUOTED", "it's $HOME")),
)


def directives(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH")
    ]


def test_two_node_gpu_script() -> None:
    script = render_sbatch_script(BASE)
    assert script.startswith("#!/bin/bash\n")
    assert directives(script) == [
        "--job-name=stalwart-a1b2.0",
        "--partition=gpu",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--gpus-per-node=4",
        "--output=/shared/stalwart/a1b2.0/slurm-%j.out",
        "--error=/shared/stalwart/a1b2.0/slurm-%j.err",
        "--chdir=/shared/stalwart/a1b2.0",
        "--requeue",
        "--open-mode=append",
    ]
    assert "export QUOTED='it'\"'\"'s $HOME'" in script
    last = script.splitlines()[-1]
    assert last == (
        "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 --gpus-per-node=4 -- "
        "python3 -m stalwart.exec.launch --trial 7"
    )


def test_directives_come_before_the_first_command() -> None:
    lines = render_sbatch_script(replace(BASE, scheduler_args=("--mem=4G",))).splitlines()
    last_directive = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    first_command = min(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert last_directive < first_command


def test_user_args_are_appended_after_stalwarts() -> None:
    script = render_sbatch_script(replace(BASE, scheduler_args=("--exclusive", "--time=2:00:00")))
    assert directives(script)[-2:] == ["--exclusive", "--time=2:00:00"]


def test_forbidden_user_args_fail_the_submission() -> None:
    with pytest.raises(SchedulerArgsError, match="--nodes=4"):
        render_sbatch_script(replace(BASE, scheduler_args=("--nodes=4",)))


def test_gpu_type_time_limit_no_requeue_and_preemption_warning() -> None:
    request = replace(
        BASE,
        gpu_type="a100",
        time_limit=timedelta(hours=26, seconds=1),
        requeue=False,
        preemption_warning=timedelta(minutes=2),
        partition=None,
    )
    lines = directives(render_sbatch_script(request))
    assert "--gpus-per-node=a100:4" in lines
    assert "--time=1-02:00:01" in lines
    assert "--no-requeue" in lines
    assert "--signal=TERM@120" in lines
    assert not any(line.startswith("--partition") for line in lines)


def test_excluded_nodes_become_exclude() -> None:
    """A trial's ``exclude_node`` log policies keep its next job off the nodes that logged."""
    assert not any(d.startswith("--exclude") for d in directives(render_sbatch_script(BASE)))
    request = replace(BASE, exclude_nodes=("node-3", "node-7"))
    assert "--exclude=node-3,node-7" in directives(render_sbatch_script(request))


def test_gres_only_clusters_request_gpus_per_node_with_gres() -> None:
    script = render_sbatch_script(BASE, SlurmOptions(tres_supported=False))
    assert "--gres=gpu:4" in directives(script)


def test_uneven_split_requests_the_total_with_tres() -> None:
    request = replace(BASE, slots=5)
    assert "--gpus=5" in directives(render_sbatch_script(request))
    assert "--gres=gpu:3" in directives(
        render_sbatch_script(request, SlurmOptions(tres_supported=False))
    )


def test_cpu_slots_become_cpus_per_task() -> None:
    request = replace(BASE, slot_type="cpu", slots=3, slots_per_node=None)
    script = render_sbatch_script(request)
    assert "--cpus-per-task=3" in directives(script)
    assert "--nodes=1" in directives(script)
    assert not any(line.startswith(("--gpus", "--gres")) for line in directives(script))
    assert "--cpus-per-task=3 --" in script.splitlines()[-1]


def test_zero_slots_run_on_one_node_with_defaults() -> None:
    lines = directives(render_sbatch_script(replace(BASE, slots=0, slots_per_node=None)))
    assert "--nodes=1" in lines
    assert not any(line.startswith(("--gpus", "--gres", "--cpus")) for line in lines)


def test_single_node_tasks_must_fit_one_node() -> None:
    with pytest.raises(SchedulerArgsError, match="runs on one node"):
        render_sbatch_script(replace(BASE, single_node=True))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"allocation_id": "../etc"}, "allocation id"),
        ({"slots": -1}, "slots must be"),
        ({"command": ()}, "command"),
        ({"env": (("BAD-NAME", "x"),)}, "environment variable name"),
    ],
)
def test_invalid_requests_are_rejected(change: dict[str, object], message: str) -> None:
    with pytest.raises(SchedulerArgsError, match=message):
        render_sbatch_script(replace(BASE, **change))  # type: ignore[arg-type]


def test_rendering_is_deterministic() -> None:
    assert render_sbatch_script(BASE) == render_sbatch_script(BASE)


@pytest.mark.parametrize(
    ("limit", "text"),
    [
        (timedelta(minutes=1), "0-00:01:00"),
        (timedelta(seconds=0.2), "0-00:00:01"),
        (timedelta(days=2, hours=3, minutes=4, seconds=5), "2-03:04:05"),
    ],
)
def test_format_time_limit(limit: timedelta, text: str) -> None:
    assert format_time_limit(limit) == text


@given(slots=st.integers(0, 512), per_node=st.one_of(st.none(), st.integers(1, 16)))
def test_layout_covers_the_slots_with_the_fewest_nodes(slots: int, per_node: int | None) -> None:
    layout = plan_layout(replace(BASE, slots=slots, slots_per_node=per_node))
    expected_nodes = max(1, -(-slots // per_node)) if per_node else 1
    assert layout.nodes == expected_nodes
    if layout.total_gpus is not None:
        assert layout.total_gpus == slots
        assert slots % layout.nodes != 0
    else:
        assert layout.gpus_per_node * layout.nodes >= slots
        assert layout.gpus_per_node * layout.nodes - slots < layout.nodes
    if per_node:
        assert layout.slots_per_node <= per_node
