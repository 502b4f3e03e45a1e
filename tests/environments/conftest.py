"""Fixtures for the environments tests: the packaged manifest and a small fake repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stalwart.environments import Manifest, load_manifest, render_table
from stalwart.environments.manifest import MANIFEST_PATH

# Image references are assembled at run time so that this file never holds a stale literal
# reference itself (the real repository must pass `stalwart envs check`).
PT = "determinedai/pytorch-ngc-dev"
TF = "determinedai/tensorflow-ngc-dev"
LEGACY_CPU = "determinedai/pytorch-tensorflow-cpu-dev"
OLD = "8b3bea3"
OLDER = "e960eae"


@pytest.fixture
def manifest() -> Manifest:
    """The packaged manifest."""
    return load_manifest()


@pytest.fixture
def fake_repo(tmp_path: Path, manifest: Manifest) -> Path:
    """A Stalwart-like checkout whose references carry old tags (not a git repository)."""
    root = tmp_path / "repo"
    target = root / "src/stalwart/environments/manifest.yaml"
    target.parent.mkdir(parents=True)
    shutil.copy(MANIFEST_PATH, target)
    rocm = manifest.default_image("pytorch", "rocm")[1]
    files = {
        "docs/guide.md": (
            "# Guide\n\n"
            f"The default image is `{PT}:{OLD}`; TensorFlow users set `{TF}:{OLD}`.\n"
            f"Before 0.34 the default was {LEGACY_CPU}:{OLDER} (envs-check: ignore)\n"
            f"ROCm: {rocm}\n"
        ),
        "helm/values.yaml": (
            "defaultImages:\n"
            f'  cpuImage: "{PT}:{OLD}"\n'
            f'  gpuImage: "{PT}:{OLDER}"\n'
            f'  rocmImage: "{rocm}"\n'
        ),
        "examples/tensorflow/const.yaml": (
            f"environment:\n  image:\n    cpu: {TF}:{OLD}\n    gpu: {TF}:{OLD}\n"
        ),
        "docs/reference/default-images.md": render_table(manifest),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
