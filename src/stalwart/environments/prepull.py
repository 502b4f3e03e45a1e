"""Pre-pull plans: which images each resource pool should already hold (a pure function).

A node that must pull a 20 GB image when its first trial lands makes that trial wait minutes.
:func:`prepull_plan` says, per pool, which images to pull ahead of time: the manifest's default
image of every framework for the pool's device type (when ``include_defaults``), and the image of
every queued or active experiment in that pool (its ``environment.image``, per device type when a
mapping; an experiment with ``resources.slots_per_trial: 0`` uses its CPU image). Order is
stable: defaults first, then experiments' images in the order given; no duplicates.

:func:`planned_images` is the same choice for a set of device types: ``stalwart envs precache``
(Slurm/PBS) builds its image cache from it. Every consumer reads this one plan:

- the Kubernetes resource manager renders it as one DaemonSet per pool
  (:mod:`stalwart.master.rm.kubernetes.prepull`);
- the master sends each agent its pool's list in every sync answer (``SyncResponse.prepull``,
  :mod:`stalwart.master.services.prepull`); an agent with a container engine pulls what it lacks;
- ``stalwart envs precache`` converts the images for a batch cluster, from experiment files or
  from a running master's plan (``GET /api/v1/prepull``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stalwart.config.experiment import ExperimentConfig
from stalwart.environments.images import FRAMEWORKS, DeviceType
from stalwart.environments.manifest import Manifest

__all__ = [
    "ExperimentImages",
    "PrepullSettings",
    "experiment_image",
    "planned_images",
    "prepull_plan",
]


class PrepullSettings(BaseModel):
    """How the master keeps the pre-pull plan (agents; Kubernetes adds its DaemonSet's fields)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="Keep the pre-pull plan and send it where images are pulled."
    )
    include_manifest_defaults: bool = Field(
        default=True,
        description="Pre-pull the manifest's default images (`stalwart envs table`) of the "
        "pool's slot type as well as the images of queued and active experiments.",
    )
    refresh_seconds: float = Field(
        default=30.0, gt=0, description="Seconds between two recomputations of the plan."
    )


@dataclass(frozen=True)
class ExperimentImages:
    """The part of a queued or active experiment the plan reads (its config raw or validated)."""

    pool: str
    config: Mapping[str, Any] | ExperimentConfig


def experiment_image(
    config: Mapping[str, Any] | ExperimentConfig, device: DeviceType
) -> str | None:
    """The image an experiment's config (raw, or validated) names for ``device`` (None: it
    names none)."""
    if isinstance(config, ExperimentConfig):
        if config.resources.slots_per_trial == 0:
            device = "cpu"
        images = config.environment.image
        named = {"cpu": images.cpu, "cuda": images.cuda, "rocm": images.rocm}[device]
        return named if named is not None and named.strip() else None
    resources = config.get("resources") or {}
    if isinstance(resources, Mapping) and resources.get("slots_per_trial") == 0:
        device = "cpu"
    environment = config.get("environment")
    image = environment.get("image") if isinstance(environment, Mapping) else None
    if isinstance(image, Mapping):
        image = image.get(device)
    return str(image) if isinstance(image, str) and image.strip() else None


def planned_images(
    manifest: Manifest,
    devices: Iterable[DeviceType],
    configs: Iterable[Mapping[str, Any] | ExperimentConfig],
    *,
    include_defaults: bool = True,
) -> list[str]:
    """The images to hold for slots of ``devices``: the manifest's defaults for each device
    (when ``include_defaults``), then each config's image for each device; no duplicates."""
    devices = list(devices)
    images: dict[str, None] = {}
    if include_defaults:
        for device in devices:
            for framework in FRAMEWORKS:
                images[manifest.default_image(framework, device)[1]] = None
    for config in configs:
        for device in devices:
            image = experiment_image(config, device)
            if image is not None:
                images[image] = None
    return list(images)


def prepull_plan(
    manifest: Manifest,
    pools: Mapping[str, DeviceType],
    experiments: Iterable[ExperimentImages],
    *,
    include_defaults: bool = True,
) -> dict[str, list[str]]:
    """Pool name -> images to pre-pull (see the module docstring). Pools not in ``pools`` are
    ignored; a pool with nothing to pull maps to an empty list."""
    configs: dict[str, list[Mapping[str, Any] | ExperimentConfig]] = {pool: [] for pool in pools}
    for experiment in experiments:
        if experiment.pool in configs:
            configs[experiment.pool].append(experiment.config)
    return {
        pool: planned_images(manifest, [device], configs[pool], include_defaults=include_defaults)
        for pool, device in pools.items()
    }
