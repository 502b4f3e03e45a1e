"""The words of image resolution: notices, warnings and the framework-conflict error.

Every message that tells a user how to pin a choice quotes the exact YAML to add, with the
images the manifest gives today. Pure functions; :mod:`.resolve` decides when each applies.
"""

from __future__ import annotations

from stalwart.environments.detect import FrameworkScan
from stalwart.environments.images import DEVICE_TYPES, DeviceType, FrameworkName
from stalwart.environments.manifest import Manifest
from stalwart.errors import FrameworkConflictError

__all__ = [
    "MAX_SCAN_NOTES",
    "cluster_default_lacks_framework",
    "declared_tensorflow_only",
    "framework_conflict",
    "framework_mismatch",
    "framework_snippet",
    "pin_snippet",
    "scan_notes",
    "tensorflow_chosen",
]

MAX_SCAN_NOTES = 3
"""At most this many skipped-file notes are passed on (then a count of the rest)."""

_NAMES: dict[FrameworkName, str] = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}
_DETERMINED_FORM = "or pin the image (Determined reads this form too):"


def pin_snippet(manifest: Manifest, framework: FrameworkName, device: DeviceType) -> str:
    """YAML lines that pin ``framework``'s default images (cpu and cuda, plus ``device``)."""
    devices = [d for d in DEVICE_TYPES if d in ("cpu", "cuda") or d == device]
    lines = ["environment:", "  image:"]
    lines += [f"    {d}: {manifest.default_image(framework, d)[1]}" for d in devices]
    return "\n".join(lines)


def framework_snippet(framework: FrameworkName) -> str:
    """YAML lines that set ``environment.framework``."""
    return f"environment:\n  framework: {framework}"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _cite(scan: FrameworkScan, framework: FrameworkName) -> str:
    return ", ".join(str(e) for e in scan.evidence(framework))


def _held(manifest: Manifest, family: str) -> str:
    return " and ".join(_NAMES[f] for f in manifest.families[family].frameworks)


def framework_conflict(
    scan: FrameworkScan, manifest: Manifest, device: DeviceType
) -> FrameworkConflictError:
    """The error for a model that imports both frameworks with no image set."""
    pt_image = manifest.default_image("pytorch", device)[1]
    tf_image = manifest.default_image("tensorflow", device)[1]
    message = (
        f"the model imports both PyTorch ({_cite(scan, 'pytorch')}) and TensorFlow "
        f"({_cite(scan, 'tensorflow')}), and no task image is set; the default images hold one "
        f"framework each (PyTorch: {pt_image}; TensorFlow: {tf_image}).\n"
        "Choose one in the experiment config, either by framework:\n"
        f"{_indent(framework_snippet('pytorch'))}\n"
        "  or\n"
        f"{_indent(framework_snippet('tensorflow'))}\n"
        f"{_DETERMINED_FORM}\n"
        f"{_indent(pin_snippet(manifest, 'tensorflow', device))}\n"
        "  or\n"
        f"{_indent(pin_snippet(manifest, 'pytorch', device))}"
    )
    return FrameworkConflictError(
        message, hint="or set environment.image to a custom image that holds both frameworks"
    )


def scan_notes(scan: FrameworkScan) -> list[str]:
    """The scan's skipped-file notes, capped at :data:`MAX_SCAN_NOTES`."""
    notes = [f"framework detection {note}" for note in scan.notes[:MAX_SCAN_NOTES]]
    if len(scan.notes) > MAX_SCAN_NOTES:
        notes.append(f"framework detection skipped {len(scan.notes) - MAX_SCAN_NOTES} more files")
    return notes


def tensorflow_chosen(scan: FrameworkScan, manifest: Manifest, device: DeviceType) -> str:
    """Notice: detection picked the TensorFlow image."""
    image = manifest.default_image("tensorflow", device)[1]
    return (
        f"the model imports TensorFlow ({_cite(scan, 'tensorflow')}) and not PyTorch, so it "
        f"gets the TensorFlow image {image}. To pin this choice, add to the experiment "
        f"config:\n{_indent(framework_snippet('tensorflow'))}\n{_DETERMINED_FORM}\n"
        f"{_indent(pin_snippet(manifest, 'tensorflow', device))}"
    )


def declared_tensorflow_only() -> str:
    """Warning: no imports found, but the dependencies name TensorFlow."""
    return (
        "warning: no file imports a framework, but the model's dependencies name TensorFlow; "
        "it gets the PyTorch default image. If it needs TensorFlow, add to the experiment "
        f"config:\n{_indent(framework_snippet('tensorflow'))}"
    )


def framework_mismatch(
    manifest: Manifest,
    framework: FrameworkName,
    image: str,
    family: str,
    source: str,
    device: DeviceType,
) -> str:
    """Warning: ``environment.framework`` asks for a framework the pinned image lacks."""
    wanted = manifest.default_image(framework, device)[1]
    return (
        f"warning: environment.framework is {framework}, but the image {image} (set by the "
        f"{source}) is the {family} image, which holds only {_held(manifest, family)}. Set "
        f"environment.image to {wanted} or to a custom image with {_NAMES[framework]}."
    )


def cluster_default_lacks_framework(
    scan: FrameworkScan,
    manifest: Manifest,
    lacking: FrameworkName,
    image: str,
    family: str,
    source: str,
    device: DeviceType,
) -> str:
    """Warning: a cluster default image lacks a framework the model imports."""
    return (
        f"warning: the model imports {_NAMES[lacking]} ({_cite(scan, lacking)}), but the image "
        f"{image} set by the {source} is the {family} image, which holds only "
        f"{_held(manifest, family)}. Pin an image in the experiment config, e.g.:\n"
        f"{_indent(pin_snippet(manifest, lacking, device))}"
    )
