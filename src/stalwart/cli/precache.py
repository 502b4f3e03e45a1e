"""``stalwart envs precache``: build the image cache of a Slurm/PBS cluster ahead of trials.

Reads the master config's ``resource_manager`` section (``container_run_type``,
``image_cache_dir``, the slot types of ``partition_overrides`` / ``slot_type``), plans with
:func:`~stalwart.hpc.precache.precache_plan` (the manifest's default images, then each
``--experiment`` config's image, then with ``--from-master`` every image of the running master's
pre-pull plan, ``GET /api/v1/prepull``: the queued and active experiments') and prints, per
image, where it is cached and the command that builds it. Without ``--dry-run`` it runs those
commands when the tool (apptainer, singularity, enroot, podman) is installed on this machine,
and exits 1 if one fails; where the tool is missing it says so and runs nothing (run it on a
node that has the tool). Problems with the files are :class:`~stalwart.errors.StalwartError`
(one line, exit 1).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from stalwart.cli import common
from stalwart.config.loader import read_yaml
from stalwart.environments import load_manifest
from stalwart.errors import ConfigError
from stalwart.hpc.precache import cluster_devices, precache_plan, run_plan
from stalwart.master.rm.hpc.settings import BatchSystemSettings, PbsSettings, SlurmSettings

__all__ = ["precache"]


def _settings(path: Path) -> tuple[BatchSystemSettings, dict[str, Any]]:
    data = read_yaml(path).data
    section = data.get("resource_manager") if isinstance(data, dict) else None
    kind = section.get("type") if isinstance(section, dict) else None
    if kind not in ("slurm", "pbs"):
        raise ConfigError(
            str(path),
            ["resource_manager.type must be slurm or pbs: precache is for batch clusters"],
        )
    assert isinstance(section, dict)
    model = SlurmSettings if kind == "slurm" else PbsSettings
    try:
        return model.model_validate(section), section
    except ValidationError as exc:
        problems = [
            f"resource_manager.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ConfigError(str(path), problems) from None


def _master_images() -> list[str]:
    """Every image of the master's pre-pull plan, in pool order, without duplicates."""
    plan = common.client().prepull_plan()
    return list(dict.fromkeys(image for images in plan.values() for image in images))


def precache(
    master_config: Annotated[
        Path, typer.Option("--master-config", "-c", help="The master config (YAML).")
    ],
    experiment: Annotated[
        list[Path] | None,
        typer.Option("--experiment", "-e", help="An experiment config whose image to cache."),
    ] = None,
    defaults: Annotated[
        bool, typer.Option("--defaults/--no-defaults", help="Cache the manifest's defaults.")
    ] = True,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; run nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    from_master: Annotated[
        bool,
        typer.Option(
            "--from-master",
            help="Also cache the images of the master's queued and active experiments (its "
            "pre-pull plan; the master is -m / STALWART_MASTER).",
        ),
    ] = False,
) -> None:
    """Convert the images trials need (apptainer/singularity SIF, enroot squashfs, podman
    pull) into the cluster's image cache, so no trial waits on a multi-GB pull."""
    settings, raw = _settings(master_config)
    run_type = settings.container_run_type
    if run_type == "none":
        typer.echo("nothing to precache: resource_manager.container_run_type is none")
        return
    cache = PurePosixPath(str(settings.image_cache_dir)) if settings.image_cache_dir else None
    if cache is None and run_type != "podman":
        raise ConfigError(
            str(master_config),
            [f"resource_manager.image_cache_dir must be set for container_run_type {run_type}"],
        )
    configs = [read_yaml(p).data for p in experiment or []]
    planned = _master_images() if from_master else []
    present = (
        [str(p) for p in Path(str(cache)).iterdir()] if cache and Path(str(cache)).is_dir() else []
    )
    try:
        plan = precache_plan(
            load_manifest(),
            run_type,
            cache,
            devices=cluster_devices(raw),
            experiments=[c for c in configs if isinstance(c, dict)],
            include_defaults=defaults,
            extra_images=planned,
            cached=present,
        )
    except ValueError as exc:
        raise ConfigError(str(master_config), [str(exc)]) from None
    if as_json:
        steps = [
            {"image": s.image, "path": str(s.path) if s.path else None, "argv": list(s.argv)}
            for s in plan.steps
        ]
        typer.echo(json.dumps({"run_type": run_type, "images": plan.images, "steps": steps}))
    else:
        typer.echo(
            f"{len(plan.images)} image(s) for {', '.join(plan.devices)}; "
            f"{len(plan.steps)} to cache ({run_type}, cache {cache or 'podman storage'})"
        )
        for step in plan.steps:
            typer.echo(f"  {step.image} -> {step.path or 'podman storage'}")
            typer.echo(f"    {shlex.join(step.argv)}")
    if dry_run or not plan.steps:
        return
    results = run_plan(plan)
    failed = [r for r in results if r.ran and r.returncode != 0]
    if results and not results[0].ran:
        typer.echo(
            f"{results[0].output}: nothing was run; run `stalwart envs precache` on a node "
            f"that has {run_type}"
        )
        return
    for result in results:
        status = "ok" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
        typer.echo(f"{result.step.image}: {status}")
        if result.returncode != 0:
            typer.echo(result.output, err=True)
    if failed:
        raise typer.Exit(1)
