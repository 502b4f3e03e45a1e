"""Task environments: the image manifest, image resolution, framework detection, bumpenvs.

- :mod:`.manifest`: ``manifest.yaml``, the single source of truth for task images.
- :mod:`.resolve`: which image a task gets (configured layers, then the framework's default).
- :mod:`.detect`: which frameworks a model directory imports (static, nothing is run).
- :mod:`.table`, :mod:`.refs`, :mod:`.bump`: the generated docs table, reference scanning,
  ``envs bump`` and ``envs check``.
"""

from __future__ import annotations

from stalwart.environments.bump import (
    BumpReport,
    FileChange,
    LineChange,
    StaleReference,
    bump,
    check,
    default_root,
    repository_manifest,
    validate_tag,
)
from stalwart.environments.detect import FrameworkEvidence, FrameworkScan, detect_frameworks
from stalwart.environments.images import (
    DEVICE_TYPES,
    FRAMEWORKS,
    DeviceType,
    FrameworkName,
    is_valid_tag,
    split_image_ref,
)
from stalwart.environments.manifest import ImageFamily, ImageRow, Manifest, load_manifest
from stalwart.environments.refs import IGNORE_MARKER
from stalwart.environments.resolve import (
    LAYER_SOURCES,
    SOURCE_EXPERIMENT,
    SOURCE_MASTER_TCD,
    SOURCE_POOL_TCD,
    SOURCE_TEMPLATE,
    Framework,
    ImageLayer,
    ImageResolution,
    ImageValue,
    device_for_slots,
    image_map,
    resolve_image,
)
from stalwart.environments.table import GENERATED_MARKER, TABLE_PATH, render_table

__all__ = [
    "DEVICE_TYPES",
    "FRAMEWORKS",
    "GENERATED_MARKER",
    "IGNORE_MARKER",
    "LAYER_SOURCES",
    "SOURCE_EXPERIMENT",
    "SOURCE_MASTER_TCD",
    "SOURCE_POOL_TCD",
    "SOURCE_TEMPLATE",
    "TABLE_PATH",
    "BumpReport",
    "DeviceType",
    "FileChange",
    "Framework",
    "FrameworkEvidence",
    "FrameworkName",
    "FrameworkScan",
    "ImageFamily",
    "ImageLayer",
    "ImageResolution",
    "ImageRow",
    "ImageValue",
    "LineChange",
    "Manifest",
    "StaleReference",
    "bump",
    "check",
    "default_root",
    "detect_frameworks",
    "device_for_slots",
    "image_map",
    "is_valid_tag",
    "load_manifest",
    "render_table",
    "repository_manifest",
    "resolve_image",
    "split_image_ref",
    "validate_tag",
]
