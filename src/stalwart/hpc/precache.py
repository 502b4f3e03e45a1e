"""``stalwart envs precache``: convert the images trials will need before they are queued.

A trial whose apptainer/enroot image is not converted yet spends minutes pulling and converting
a multi-GB image on a compute node. :func:`precache_plan` (pure) says which images to convert,
where they go and the command for each; :func:`run_plan` runs it where the tool is installed.

Which images: the pre-pull plan's choice (:func:`stalwart.environments.prepull.planned_images`,
the same the master sends agents and Kubernetes pulls): the manifest's default image of every
framework for each device type the cluster has (``include_defaults``), then each experiment
config's ``environment.image`` for those device types, in order, without duplicates. Device
types: the slot types the master config declares (``partition_overrides``, ``slot_type``),
else ``cpu`` and ``cuda``. ``extra_images`` (a running master's plan) come after them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from stalwart.environments.images import DeviceType
from stalwart.environments.manifest import Manifest
from stalwart.environments.prepull import planned_images
from stalwart.hpc.containers import ContainerRunType, PrecacheStep, precache_steps, tool_of

__all__ = ["PrecachePlan", "StepResult", "precache_plan", "run_plan"]


@dataclass(frozen=True)
class PrecachePlan:
    """What precache does: the run type, the cache directory and one step per image to build."""

    run_type: ContainerRunType
    cache_dir: PurePosixPath | None
    devices: tuple[DeviceType, ...]
    images: tuple[str, ...]
    steps: tuple[PrecacheStep, ...]


def cluster_devices(settings: Mapping[str, Any]) -> tuple[DeviceType, ...]:
    """The device types of a ``resource_manager`` section (see the module docstring)."""
    found: list[DeviceType] = []
    overrides = settings.get("partition_overrides")
    kinds = [settings.get("slot_type")]
    if isinstance(overrides, Mapping):
        kinds += [o.get("slot_type") for o in overrides.values() if isinstance(o, Mapping)]
    for kind in kinds:
        if kind in ("cpu", "cuda", "rocm") and kind not in found:
            found.append(kind)
    return tuple(found) or ("cpu", "cuda")


def precache_plan(
    manifest: Manifest,
    run_type: ContainerRunType,
    cache_dir: PurePosixPath | None,
    *,
    devices: Sequence[DeviceType],
    experiments: Iterable[Mapping[str, Any]] = (),
    include_defaults: bool = True,
    extra_images: Iterable[str] = (),
    cached: Iterable[str] = (),
) -> PrecachePlan:
    """The plan (see the module docstring); ``cached``: files already in the cache (skipped).

    Raises ValueError when ``run_type`` needs a cache directory and has none."""
    chosen = planned_images(manifest, devices, experiments, include_defaults=include_defaults)
    images = dict.fromkeys([*chosen, *extra_images])
    steps = precache_steps(run_type, images, cache_dir, cached=cached)
    return PrecachePlan(run_type, cache_dir, tuple(devices), tuple(images), tuple(steps))


@dataclass(frozen=True)
class StepResult:
    """How one step went: ``ran`` False when the tool is missing here; ``returncode``."""

    step: PrecacheStep
    ran: bool
    returncode: int | None
    output: str


def run_plan(
    plan: PrecachePlan,
    *,
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] | None = None,
) -> list[StepResult]:
    """Run each step (in order, creating the cache directory first) when the run type's tool is
    installed here; otherwise nothing runs and every step says so (``ran`` False)."""
    tool = tool_of(plan.run_type)
    if tool is None or not plan.steps:
        return []
    if which(tool) is None:
        return [
            StepResult(step, False, None, f"{tool} is not installed here") for step in plan.steps
        ]
    if plan.cache_dir is not None:
        Path(str(plan.cache_dir)).mkdir(parents=True, exist_ok=True)
    runner = run or _run
    results = []
    for step in plan.steps:
        done = runner(step.argv)
        results.append(StepResult(step, True, done.returncode, (done.stdout + done.stderr)[-2000:]))
    return results


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)
