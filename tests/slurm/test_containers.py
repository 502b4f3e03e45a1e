"""Tasks in containers on Slurm/PBS (pure: no container engine here) and the precache plan.

``task_argv`` per run type, the image cache names, the launcher's runner (the tool missing, an
image cached or not), what the master exports in the batch script, and ``stalwart envs
precache`` (plan printed; nothing runs where the tool is missing).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from stalwart.agent.protocol import TaskSpec
from stalwart.agent.runner import ContainerStartError, ProcessRunner
from stalwart.agent.workspace import Workspace
from stalwart.cli.main import main
from stalwart.config.hpc import SlurmConfig
from stalwart.environments import load_manifest
from stalwart.environments.prepull import planned_images
from stalwart.hpc.container_runner import (
    ContainerTaskRunner,
    container_env,
    runner_from_environ,
)
from stalwart.hpc.containers import cached_image, image_source, precache_steps, task_argv
from stalwart.hpc.precache import cluster_devices, precache_plan, run_plan
from stalwart.hpc.slurm.script import render_sbatch_script
from stalwart.master.db.tables import Allocation
from stalwart.master.rm.hpc import jobs
from stalwart.master.rm.hpc.settings import SlurmSettings

IMAGE = "determinedai/pytorch-ngc:0.38.0"
ARGV = ["sh", "-c", "python3 train.py"]


def _argv(run_type: str, slot_type: str = "cpu", image: str = IMAGE) -> list[str]:
    return task_argv(
        run_type,  # type: ignore[arg-type]
        ARGV,
        image=image,
        slot_type=slot_type,  # type: ignore[arg-type]
        workdir="/shared/jobs/a1/tasks/w",
        run_dir="/shared/jobs/a1/tasks/run",
        binds=["/shared/jobs", "/data", "/shared/jobs"],
        env_names=["DET_MASTER", "DET_ALLOCATION_ID"],
    )


def test_none_runs_the_command_as_it_is() -> None:
    assert _argv("none") == ARGV


@pytest.mark.parametrize("tool", ["apptainer", "singularity"])
def test_apptainer_binds_the_job_and_the_run_dir_and_keeps_the_workdir(tool: str) -> None:
    argv = _argv(tool, "cuda", "/cache/img.sif")
    assert argv[:3] == [tool, "exec", "--nv"]
    binds = argv[argv.index("--bind") + 1].split(",")
    assert binds == [
        "/shared/jobs:/shared/jobs",
        "/data:/data",
        "/shared/jobs/a1/tasks/run:/run/determined",  # the official harness's path
    ]
    assert argv[argv.index("--pwd") + 1] == "/shared/jobs/a1/tasks/w"
    assert argv[-4:] == ["/cache/img.sif", *ARGV]
    assert "--rocm" in _argv(tool, "rocm")
    assert "--nv" not in _argv(tool, "cpu")
    assert _argv(tool)[-4] == f"docker://{IMAGE}"  # not cached: the tool pulls it


def test_podman_shares_the_network_and_passes_the_environment() -> None:
    argv = _argv("podman", "cuda")
    assert argv[:3] == ["podman", "run", "--rm"]
    assert "--network=host" in argv
    assert "--env-host" in argv
    assert argv[argv.index("--device") + 1] == "nvidia.com/gpu=all"
    assert "/shared/jobs/a1/tasks/run:/run/determined" in argv
    assert argv[argv.index("--workdir") + 1] == "/shared/jobs/a1/tasks/w"
    assert argv[-4:] == [IMAGE, *ARGV]
    rocm = _argv("podman", "rocm")
    assert rocm[6:10] == ["--device", "/dev/kfd", "--device", "/dev/dri"] or "/dev/kfd" in rocm


def test_enroot_creates_the_container_once_then_starts_it_with_the_environment() -> None:
    argv = _argv("enroot", "cuda", "nvcr.io/nvidia/pytorch:24.01-py3")
    assert argv[:2] == ["sh", "-c"]
    assert "enroot create --name stalwart-" in argv[2]
    # Not cached: imported on the node first, in enroot's spelling of a registry.
    assert "enroot import --output /tmp/stalwart-" in argv[2]
    assert "docker://nvcr.io#nvidia/pytorch:24.01-py3" in argv[2]
    cached = _argv("enroot", "cpu", "/cache/img.sqsh")
    assert "enroot import" not in cached[2]
    assert "enroot create --name stalwart-" in cached[2]
    assert "/cache/img.sqsh" in cached[2]
    start = argv[argv.index("enroot") :]
    assert start[:3] == ["enroot", "start", "--rw"]
    assert start[start.index("DET_ALLOCATION_ID") - 1 :][:2] == ["--env", "DET_ALLOCATION_ID"]
    assert "NVIDIA_VISIBLE_DEVICES" in start
    assert "/shared/jobs/a1/tasks/run:/run/determined" in start
    assert start[-4:] == ["/shared/jobs/a1/tasks/w", *ARGV]


def test_image_sources_and_cache_names() -> None:
    assert image_source(IMAGE) == f"docker://{IMAGE}"
    assert image_source("oras://ghcr.io/x/y:1") == "oras://ghcr.io/x/y:1"
    assert image_source("/shared/images/t.sif") == "/shared/images/t.sif"
    cache = PurePosixPath("/cache")
    sif = cached_image("apptainer", IMAGE, cache)
    assert sif is not None
    assert sif.parent == cache
    assert sif.name.startswith("determinedai_pytorch-ngc_0.38.0-")
    assert sif.suffix == ".sif"
    other = cached_image("apptainer", "determinedai/pytorch_ngc:0.38.0", cache)
    assert other != sif  # names that differ only in replaced characters stay apart
    enroot = cached_image("enroot", IMAGE, cache)
    assert enroot is not None
    assert enroot.suffix == ".sqsh"
    assert cached_image("podman", IMAGE, cache) is None


def test_precache_steps_per_tool_skip_cached_images_and_files() -> None:
    cache = PurePosixPath("/cache")
    images = [IMAGE, "python:3.11", IMAGE, "/shared/own.sif"]
    steps = precache_steps("apptainer", images, cache)
    assert [s.image for s in steps] == [IMAGE, "python:3.11"]
    assert steps[0].argv == ("apptainer", "pull", str(steps[0].path), f"docker://{IMAGE}")
    cached = precache_steps("apptainer", images, cache, cached=[str(steps[0].path)])
    assert [s.image for s in cached] == ["python:3.11"]
    (enroot, _) = precache_steps("enroot", images, cache)
    assert enroot.argv[:3] == ("enroot", "import", "--output")
    (podman, _) = precache_steps("podman", images, None)
    assert podman.argv == ("podman", "pull", IMAGE)
    with pytest.raises(ValueError, match="image cache directory"):
        precache_steps("singularity", images, None)
    assert precache_steps("none", images, cache) == []


def _workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "rank-0"
    for sub in ("run", "work"):
        (root / sub).mkdir(parents=True)
    return Workspace(root, root / "run", root / "work", Path("/usr/bin/python3"), {"A": "1"})


def _spec(image: str = IMAGE) -> TaskSpec:
    return TaskSpec(
        allocation_id="1.1",
        task_id="1.1",
        rank=0,
        container_id="c",
        argv=ARGV,
        image=image,
        token="t",
        device_type="cuda",
    )


def test_the_launcher_runs_the_cached_image_when_there(tmp_path: Path) -> None:
    cache = PurePosixPath(str(tmp_path / "cache"))
    sif = cached_image("apptainer", IMAGE, cache)
    runner = ContainerTaskRunner(
        "apptainer",
        cache_dir=cache,
        binds=["/shared"],
        which=lambda tool: f"/usr/bin/{tool}",
        exists=lambda path: path == str(sif),
    )
    workspace = _workspace(tmp_path)
    argv, env = runner.command(_spec(), workspace)
    assert argv[:3] == ["apptainer", "exec", "--nv"]
    assert str(sif) in argv
    assert env == {"A": "1"}
    assert not workspace.stderr_path.exists()


def test_the_launcher_says_when_the_image_is_not_cached(tmp_path: Path) -> None:
    cache = PurePosixPath(str(tmp_path / "cache"))
    runner = ContainerTaskRunner(
        "apptainer", cache_dir=cache, which=lambda t: t, exists=lambda p: False
    )
    workspace = _workspace(tmp_path)
    argv, _ = runner.command(_spec(), workspace)
    assert f"docker://{IMAGE}" in argv
    assert "stalwart envs precache" in workspace.stderr_path.read_text()


def test_a_missing_tool_or_image_fails_the_start_with_what_to_do(tmp_path: Path) -> None:
    runner = ContainerTaskRunner("enroot", which=lambda t: None)
    with pytest.raises(ContainerStartError, match="`enroot` is not installed on this node"):
        runner.command(_spec(), _workspace(tmp_path))
    runner = ContainerTaskRunner("podman", which=lambda t: t)
    with pytest.raises(ContainerStartError, match=r"set environment\.image"):
        runner.command(_spec(image=""), _workspace(tmp_path / "b"))


def test_the_batch_script_exports_the_container_settings(tmp_path: Path) -> None:
    settings = SlurmSettings(
        type="slurm",
        job_storage_root=tmp_path / "jobs",
        container_run_type="apptainer",
        image_cache_dir=Path("/shared/sif"),
        container_binds=["/datasets"],
    )
    allocation = Allocation(id="1.1", slots=1, resource_pool="default", task_id="1")
    request = jobs.batch_request(
        allocation, SlurmConfig(), settings, master_url="http://m:8080", python="p"
    )
    env = dict(request.env)
    assert env["STALWART_CONTAINER_RUN_TYPE"] == "apptainer"
    assert env["STALWART_IMAGE_CACHE_DIR"] == "/shared/sif"
    assert env["STALWART_CONTAINER_BINDS"] == f"{tmp_path / 'jobs'}:/datasets"
    script = render_sbatch_script(request)
    assert "export STALWART_CONTAINER_RUN_TYPE=apptainer" in script
    runner = runner_from_environ(env)
    assert isinstance(runner, ContainerTaskRunner)
    assert runner.binds == (str(tmp_path / "jobs"), "/datasets")
    assert type(runner_from_environ({})) is ProcessRunner
    assert container_env("none", None, ["/x"]) == ()
    with pytest.raises(ValueError, match="docker"):
        runner_from_environ({"STALWART_CONTAINER_RUN_TYPE": "docker"})


def test_the_precache_plan_takes_defaults_then_experiments_images() -> None:
    manifest = load_manifest()
    experiments: list[dict[str, Any]] = [
        {"environment": {"image": "my/own:1"}},
        {"environment": {"image": {"cpu": "my/cpu:1", "cuda": "my/gpu:1"}}},
        {"environment": {}},
    ]
    plan = precache_plan(
        manifest,
        "apptainer",
        PurePosixPath("/cache"),
        devices=("cpu",),
        experiments=experiments,
    )
    assert plan.images[-2:] == ("my/own:1", "my/cpu:1")
    assert len(plan.images) >= 3  # the manifest's default images come first
    assert all(str(s.path).startswith("/cache/") for s in plan.steps)
    mapped = planned_images(manifest, ["cpu", "cuda"], experiments[1:2], include_defaults=False)
    assert mapped == ["my/cpu:1", "my/gpu:1"]
    master_plan = precache_plan(
        manifest,
        "apptainer",
        PurePosixPath("/cache"),
        devices=("cpu",),
        include_defaults=False,
        extra_images=["from/master:1", "my/own:1"],
        experiments=experiments[:1],
    )
    assert master_plan.images == ("my/own:1", "from/master:1")
    assert cluster_devices({"partition_overrides": {"a": {"slot_type": "rocm"}}}) == ("rocm",)
    assert cluster_devices({}) == ("cpu", "cuda")
    missing = run_plan(plan, which=lambda t: None)
    assert missing
    assert all(not r.ran for r in missing)
    calls: list[list[str]] = []

    def fake_run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    small = precache_plan(
        manifest,
        "podman",
        None,
        devices=("cpu",),
        experiments=experiments[:1],
        include_defaults=False,
    )
    done = run_plan(small, which=lambda t: t, run=fake_run)
    assert [r.returncode for r in done] == [0]
    assert calls == [["podman", "pull", "my/own:1"]]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the ``stalwart`` CLI; (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def test_envs_precache_prints_the_plan_and_runs_nothing_without_the_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    master = tmp_path / "master.yaml"
    master.write_text(
        "resource_manager:\n  type: slurm\n"
        f"  job_storage_root: {tmp_path / 'jobs'}\n"
        "  container_run_type: enroot\n"
        f"  image_cache_dir: {tmp_path / 'cache'}\n"
        "  partition_overrides:\n    debug: {slot_type: cpu}\n"
    )
    experiment = tmp_path / "exp.yaml"
    experiment.write_text("environment:\n  image: my/own:1\n")
    code, out, _ = _cli(
        capsys, "envs", "precache", "-c", str(master), "-e", str(experiment), "--json"
    )
    assert code == 0, out
    plan = json.loads(out.splitlines()[0])
    assert plan["run_type"] == "enroot"
    assert plan["images"][-1] == "my/own:1"
    assert plan["steps"][-1]["argv"][:3] == ["enroot", "import", "--output"]
    assert plan["steps"][-1]["path"].startswith(str(tmp_path / "cache"))
    if shutil.which("enroot") is None:
        assert "enroot is not installed here: nothing was run" in out
        assert not (tmp_path / "cache").exists()
    code, out, _ = _cli(capsys, "envs", "precache", "-c", str(master), "--dry-run")
    assert code == 0
    assert "enroot import --output" in out
    assert "nothing was run" not in out
    master.write_text(master.read_text().replace("container_run_type: enroot", "x: 1"))
    code, out, err = _cli(capsys, "envs", "precache", "-c", str(master))
    assert code == 1
    assert "resource_manager.x: Extra inputs are not permitted" in out + err
