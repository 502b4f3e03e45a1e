"""Pre-pull plans: which images each resource pool should already hold (a pure function).

A node that must pull a 20 GB image when its first trial lands makes that trial wait minutes.
:func:`prepull_plan` says, per pool, which images to pull ahead of time: the manifest's default
image of every framework for the pool's device type (when ``include_defaults``), and the image of
every queued or active experiment in that pool (its ``environment.image``, per device type when a
mapping; an experiment with ``resources.slots_per_trial: 0`` uses its CPU image). Order is
stable: defaults first, then experiments' images in the order given; no duplicates.

The Kubernetes resource manager renders the plan as one DaemonSet per pool
(:mod:`stalwart.master.k8s.prepull`); the same plan suits agents (pull at registration) and
Slurm (``envs precache``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stalwart.environments.images import FRAMEWORKS, DeviceType
from stalwart.environments.manifest import Manifest

__all__ = ["ExperimentImages", "experiment_image", "prepull_plan"]


@dataclass(frozen=True)
class ExperimentImages:
    """The part of a queued or active experiment the plan reads."""

    pool: str
    config: Mapping[str, Any]


def experiment_image(config: Mapping[str, Any], device: DeviceType) -> str | None:
    """The image an experiment's config names for ``device`` (None: it names none)."""
    resources = config.get("resources") or {}
    if isinstance(resources, Mapping) and resources.get("slots_per_trial") == 0:
        device = "cpu"
    image = (config.get("environment") or {}).get("image")
    if isinstance(image, Mapping):
        image = image.get(device)
    return str(image) if isinstance(image, str) and image.strip() else None


def prepull_plan(
    manifest: Manifest,
    pools: Mapping[str, DeviceType],
    experiments: Iterable[ExperimentImages],
    *,
    include_defaults: bool = True,
) -> dict[str, list[str]]:
    """Pool name -> images to pre-pull (see the module docstring). Pools not in ``pools`` are
    ignored; a pool with nothing to pull maps to an empty list."""
    plan: dict[str, dict[str, None]] = {}
    for pool, device in pools.items():
        images: dict[str, None] = {}
        if include_defaults:
            for framework in FRAMEWORKS:
                images[manifest.default_image(framework, device)[1]] = None
        plan[pool] = images
    for experiment in experiments:
        pool_device = pools.get(experiment.pool)
        if pool_device is None:
            continue
        image = experiment_image(experiment.config, pool_device)
        if image is not None:
            plan[experiment.pool][image] = None
    return {pool: list(images) for pool, images in plan.items()}
