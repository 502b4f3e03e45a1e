"""Choosing a task's image: configured layers first, then the manifest default for its framework.

Contract of :func:`resolve_image`:

1. ``layers`` are given in precedence order (experiment, template, resource pool
   ``task_container_defaults``, master ``task_container_defaults``); the first layer whose ``image``
   names an image for the device wins. Its value is Determined's raw ``image`` form (see
   :func:`image_map`).
2. When no layer sets one, the manifest default for the framework is used. ``framework="auto"``
   with a ``model_dir`` scans the model's imports (:func:`~.detect.detect_frameworks`): the
   PyTorch default is used unless the model imports a framework it lacks; then the TensorFlow
   default is used if it holds every framework imported (with a notice saying so and how to pin
   it); otherwise :class:`~stalwart.errors.FrameworkConflictError` names both images and the
   exact config lines to add. Submitting therefore never silently runs a TensorFlow model on a
   PyTorch-only image.
3. A pinned image is never replaced. When it is a known manifest image that lacks the framework
   asked for (``framework`` explicit), or one that a cluster default (a ``task_container_defaults``
   layer) set and that lacks a framework the model imports, a ``warning:`` notice says so.

Zero-slot tasks run on CPU: callers pass ``device_for_slots(slots, slot_type)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from stalwart.environments import messages
from stalwart.environments.detect import FrameworkScan, detect_frameworks
from stalwart.environments.images import DEVICE_TYPES, DeviceType, FrameworkName
from stalwart.environments.manifest import Manifest, load_manifest
from stalwart.errors import ImageSpecError

__all__ = [
    "LAYER_SOURCES",
    "SOURCE_EXPERIMENT",
    "SOURCE_MASTER_TCD",
    "SOURCE_POOL_TCD",
    "SOURCE_TEMPLATE",
    "Framework",
    "ImageLayer",
    "ImageResolution",
    "ImageValue",
    "device_for_slots",
    "image_map",
    "resolve_image",
]

Framework = Literal["pytorch", "tensorflow", "auto"]
"""``environment.framework``: a framework, or ``auto`` (detect from the model's imports)."""

ImageValue: TypeAlias = str | Mapping[str, str | None] | None
"""Determined's raw ``image`` value: one string for every device, or a per-device map."""

SOURCE_EXPERIMENT = "experiment"
SOURCE_TEMPLATE = "template"
SOURCE_POOL_TCD = "resource pool task_container_defaults"
SOURCE_MASTER_TCD = "master task_container_defaults"
LAYER_SOURCES = (SOURCE_EXPERIMENT, SOURCE_TEMPLATE, SOURCE_POOL_TCD, SOURCE_MASTER_TCD)
"""Layer names, highest precedence first."""

_USER_SOURCES = frozenset({SOURCE_EXPERIMENT, SOURCE_TEMPLATE})
_MAP_KEYS = ("cpu", "cuda", "rocm", "gpu")
_PREFERENCE: tuple[FrameworkName, ...] = ("pytorch", "tensorflow")


@dataclass(frozen=True)
class ImageLayer:
    """One place an image can be configured: its name and its raw ``image`` value."""

    source: str
    value: ImageValue = None


class ImageResolution(BaseModel):
    """The image a task gets, where it came from, and anything the user should know."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(description="The full image reference the task runs in.")
    device: DeviceType = Field(description="The device type the image was chosen for.")
    source: str = Field(description="The layer that set it, or 'manifest default (<family>)'.")
    family: str | None = Field(description="The manifest family of the image, if it is known.")
    notices: list[str] = Field(description="Things to tell the user; warnings start 'warning:'.")


def device_for_slots(slots: int, slot_type: DeviceType) -> DeviceType:
    """The device type whose image a task uses: ``cpu`` for zero slots, else ``slot_type``."""
    if slots < 0:
        raise ValueError(f"slots must be >= 0, got {slots}")
    return "cpu" if slots == 0 else slot_type


def _set(value: object, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ImageSpecError(f"image.{key} must be a string, got {type(value).__name__}")
    return value if value.strip() else None


def image_map(value: object) -> dict[DeviceType, str | None]:
    """Normalize a raw ``image`` value to ``{cpu, cuda, rocm} -> image or None``.

    A string applies to every device; a map takes ``cpu``/``cuda``/``rocm``, and the legacy
    ``gpu`` key is read only when ``cuda`` is unset. Empty (or blank) strings count as unset.
    Raises ImageSpecError (also a ValueError) for any other shape or an unknown key.
    """
    if value is None:
        return dict.fromkeys(DEVICE_TYPES)
    if isinstance(value, str):
        return dict.fromkeys(DEVICE_TYPES, _set(value, "image"))
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _MAP_KEYS)
        if unknown:
            raise ImageSpecError(
                f"image: unknown key(s) {', '.join(unknown)} (expected cpu, cuda, rocm or gpu)"
            )
        cuda = _set(value.get("cuda"), "cuda")
        gpu = _set(value.get("gpu"), "gpu")
        return {
            "cpu": _set(value.get("cpu"), "cpu"),
            "cuda": cuda if cuda is not None else gpu,
            "rocm": _set(value.get("rocm"), "rocm"),
        }
    raise ImageSpecError(
        f"image must be a string or a map of cpu/cuda/rocm, got {type(value).__name__}"
    )


def _auto_default(
    scan: FrameworkScan, manifest: Manifest, device: DeviceType
) -> tuple[FrameworkName, list[str]]:
    """The framework whose default image holds everything the model imports, with notices."""
    found = scan.frameworks
    notices = messages.scan_notes(scan)
    fits = [
        f
        for f in _PREFERENCE
        if found <= set(manifest.families[manifest.default_image(f, device)[0]].frameworks)
    ]
    if not fits:
        raise messages.framework_conflict(scan, manifest, device)
    framework = fits[0]
    if framework == "tensorflow":
        notices.append(messages.tensorflow_chosen(scan, manifest, device))
    elif not found and "tensorflow" in scan.declared and "pytorch" not in scan.declared:
        notices.append(messages.declared_tensorflow_only())
    return framework, notices


def _pinned_notices(
    layer: ImageLayer,
    image: str,
    framework: Framework,
    model_dir: Path | None,
    manifest: Manifest,
    device: DeviceType,
) -> list[str]:
    """Warnings for a pinned manifest image that lacks a framework asked for or imported."""
    family = manifest.family_of(image)
    if family is None:
        return []
    held = manifest.families[family].frameworks
    if framework != "auto":
        if framework in held:
            return []
        return [
            messages.framework_mismatch(manifest, framework, image, family, layer.source, device)
        ]
    if layer.source in _USER_SOURCES or model_dir is None:
        return []
    scan = detect_frameworks(model_dir)
    missing = sorted(scan.frameworks - set(held))
    if not missing:
        return []
    return [
        messages.cluster_default_lacks_framework(
            scan, manifest, missing[0], image, family, layer.source, device
        )
    ]


def resolve_image(
    device: DeviceType,
    layers: Sequence[ImageLayer],
    *,
    framework: Framework = "auto",
    model_dir: Path | None = None,
    manifest: Manifest | None = None,
) -> ImageResolution:
    """The image a task on ``device`` runs in; see the module docstring for the contract.

    Raises FrameworkConflictError (framework auto, no image set, the model imports frameworks no
    single default image holds), ImageSpecError (a malformed layer value) and
    EnvironmentResolutionError (``model_dir`` does not exist).
    """
    manifest = manifest if manifest is not None else load_manifest()
    for layer in layers:
        image = image_map(layer.value)[device]
        if image is None:
            continue
        pinned = _pinned_notices(layer, image, framework, model_dir, manifest, device)
        return ImageResolution(
            image=image,
            device=device,
            source=layer.source,
            family=manifest.family_of(image),
            notices=pinned,
        )
    notices: list[str] = []
    chosen: FrameworkName
    if framework != "auto":
        chosen = framework
    elif model_dir is None:
        chosen = "pytorch"
    else:
        chosen, notices = _auto_default(detect_frameworks(model_dir), manifest, device)
    family, image = manifest.default_image(chosen, device)
    return ImageResolution(
        image=image,
        device=device,
        source=f"manifest default ({family})",
        family=family,
        notices=notices,
    )
