"""resolve_image: layer precedence, manifest defaults per framework, framework detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.environments import (
    LAYER_SOURCES,
    SOURCE_EXPERIMENT,
    SOURCE_MASTER_TCD,
    SOURCE_POOL_TCD,
    SOURCE_TEMPLATE,
    DeviceType,
    ImageLayer,
    Manifest,
    resolve_image,
)
from stalwart.errors import EnvironmentResolutionError, FrameworkConflictError

DEVICES: list[DeviceType] = ["cpu", "cuda", "rocm"]


def _model(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def tf_model(tmp_path: Path) -> Path:
    return _model(tmp_path / "tf", {"model_def.py": "import tensorflow as tf\n"})


@pytest.fixture
def pt_model(tmp_path: Path) -> Path:
    return _model(tmp_path / "pt", {"model_def.py": "import torch\n"})


@pytest.fixture
def mixed_model(tmp_path: Path) -> Path:
    return _model(
        tmp_path / "mixed",
        {"train.py": "import torch\n", "data.py": "from tensorflow import keras\n"},
    )


@pytest.mark.parametrize("device", DEVICES)
def test_no_layers_gives_the_pytorch_default(manifest: Manifest, device: DeviceType) -> None:
    result = resolve_image(device, [])
    family, image = manifest.default_image("pytorch", device)
    assert (result.image, result.family, result.device) == (image, family, device)
    assert result.source == f"manifest default ({family})"
    assert result.notices == []


def test_layer_source_names_in_precedence_order() -> None:
    assert LAYER_SOURCES == (
        "experiment",
        "template",
        "resource pool task_container_defaults",
        "master task_container_defaults",
    )


@pytest.mark.parametrize("winner", range(len(LAYER_SOURCES)))
@pytest.mark.parametrize("device", DEVICES)
def test_first_layer_with_an_image_wins(winner: int, device: DeviceType) -> None:
    layers = [
        ImageLayer(source, None if i < winner else f"registry/{i}:t")
        for i, source in enumerate(LAYER_SOURCES)
    ]
    result = resolve_image(device, layers)
    assert result.image == f"registry/{winner}:t"
    assert result.source == LAYER_SOURCES[winner]
    assert result.family is None


def test_a_layer_without_this_device_falls_through() -> None:
    layers = [
        ImageLayer(SOURCE_EXPERIMENT, {"cpu": "exp-cpu"}),
        ImageLayer(SOURCE_TEMPLATE, {"cuda": "", "gpu": "tmpl-gpu"}),
        ImageLayer(SOURCE_POOL_TCD, {"rocm": "pool-rocm"}),
        ImageLayer(SOURCE_MASTER_TCD, "master-all"),
    ]
    assert resolve_image("cpu", layers).source == SOURCE_EXPERIMENT
    cuda = resolve_image("cuda", layers)
    assert (cuda.image, cuda.source) == ("tmpl-gpu", SOURCE_TEMPLATE)
    assert resolve_image("rocm", layers).image == "pool-rocm"
    assert resolve_image("rocm", layers[:2] + layers[3:]).source == SOURCE_MASTER_TCD


def test_empty_strings_fall_through_to_the_default(manifest: Manifest) -> None:
    result = resolve_image("cuda", [ImageLayer(SOURCE_EXPERIMENT, ""), ImageLayer(SOURCE_TEMPLATE)])
    assert result.image == manifest.default_image("pytorch", "cuda")[1]


@pytest.mark.parametrize("device", DEVICES)
def test_explicit_tensorflow_picks_the_tensorflow_family(
    manifest: Manifest, device: DeviceType, tmp_path: Path
) -> None:
    # No scan: a model directory that does not exist is never read.
    result = resolve_image(device, [], framework="tensorflow", model_dir=tmp_path / "absent")
    family, image = manifest.default_image("tensorflow", device)
    assert (result.image, result.family) == (image, family)
    assert family == ("rocm" if device == "rocm" else "tensorflow-ngc")


def test_auto_with_a_tensorflow_model_gets_the_tensorflow_image(
    manifest: Manifest, tf_model: Path
) -> None:
    result = resolve_image("cuda", [], model_dir=tf_model)
    assert result.image == manifest.default_image("tensorflow", "cuda")[1]
    assert result.family == "tensorflow-ngc"
    (notice,) = result.notices
    assert "model_def.py:1: tensorflow" in notice
    assert "environment:\n      framework: tensorflow" in notice
    assert f"cuda: {result.image}" in notice


@pytest.mark.parametrize("files", [{"a.py": "import torch\n"}, {"a.py": "import os\n"}, {}])
def test_auto_with_pytorch_or_nothing_gets_pytorch(
    manifest: Manifest, tmp_path: Path, files: dict[str, str]
) -> None:
    result = resolve_image("cuda", [], model_dir=_model(tmp_path / "m", files))
    assert result.image == manifest.default_image("pytorch", "cuda")[1]
    assert result.notices == []


def test_auto_with_both_frameworks_is_a_conflict(manifest: Manifest, mixed_model: Path) -> None:
    with pytest.raises(FrameworkConflictError) as info:
        resolve_image("cuda", [], model_dir=mixed_model)
    message = info.value.message
    pt_image = manifest.default_image("pytorch", "cuda")[1]
    tf_image = manifest.default_image("tensorflow", "cuda")[1]
    assert pt_image in message
    assert tf_image in message
    assert "train.py:1: torch" in message
    assert "data.py:1: tensorflow" in message
    assert "environment:\n      framework: pytorch" in message
    assert (
        f"environment:\n      image:\n        cpu: {tf_image}\n        cuda: {tf_image}" in message
    )
    assert info.value.code == "framework_conflict"


def test_both_frameworks_on_rocm_use_the_image_that_holds_both(
    manifest: Manifest, mixed_model: Path
) -> None:
    result = resolve_image("rocm", [], model_dir=mixed_model)
    assert result.family == "rocm"
    assert result.image == manifest.default_image("tensorflow", "rocm")[1]


def test_a_pinned_image_needs_no_scan(tmp_path: Path) -> None:
    layers = [ImageLayer(SOURCE_EXPERIMENT, "custom:1")]
    result = resolve_image("cuda", layers, model_dir=tmp_path / "absent")
    assert (result.image, result.source, result.notices) == ("custom:1", SOURCE_EXPERIMENT, [])


def test_pinned_pytorch_image_with_framework_tensorflow_warns(manifest: Manifest) -> None:
    pt_image = manifest.default_image("pytorch", "cuda")[1]
    layers = [ImageLayer(SOURCE_EXPERIMENT, {"cuda": pt_image})]
    result = resolve_image("cuda", layers, framework="tensorflow")
    assert result.image == pt_image
    (notice,) = result.notices
    assert notice.startswith("warning: environment.framework is tensorflow")
    assert manifest.default_image("tensorflow", "cuda")[1] in notice


def test_pinned_tensorflow_image_with_framework_pytorch_warns(manifest: Manifest) -> None:
    tf_image = manifest.default_image("tensorflow", "cpu")[1]
    result = resolve_image("cpu", [ImageLayer(SOURCE_TEMPLATE, tf_image)], framework="pytorch")
    assert result.family == "tensorflow-ngc"
    assert result.notices[0].startswith("warning: environment.framework is pytorch")


def test_pinned_image_holding_the_framework_or_unknown_does_not_warn(manifest: Manifest) -> None:
    legacy = manifest.image_ref("pytorch-tensorflow", "cuda")
    assert (
        resolve_image(
            "cuda", [ImageLayer(SOURCE_EXPERIMENT, legacy)], framework="tensorflow"
        ).notices
        == []
    )
    custom = [ImageLayer(SOURCE_EXPERIMENT, "me/custom:1")]
    assert resolve_image("cuda", custom, framework="tensorflow").notices == []


def test_cluster_default_pytorch_image_warns_for_a_tensorflow_model(
    manifest: Manifest, tf_model: Path
) -> None:
    pt_image = manifest.default_image("pytorch", "cuda")[1]
    tcd = [ImageLayer(SOURCE_MASTER_TCD, {"cpu": pt_image, "gpu": pt_image})]
    result = resolve_image("cuda", tcd, model_dir=tf_model)
    assert (result.image, result.source) == (pt_image, SOURCE_MASTER_TCD)
    (notice,) = result.notices
    assert notice.startswith("warning: the model imports TensorFlow (model_def.py:1: tensorflow)")
    # The user's own pin is respected without a scan-based warning.
    mine = [ImageLayer(SOURCE_EXPERIMENT, pt_image)]
    assert resolve_image("cuda", mine, model_dir=tf_model).notices == []


def test_unparsable_files_are_mentioned(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", {"ok.py": "import torch\n", "bad.py": "def f(:\n"})
    result = resolve_image("cpu", [], model_dir=model)
    assert result.family == "pytorch-ngc"
    assert any("bad.py" in n and "not valid Python" in n for n in result.notices)


def test_dependencies_naming_tensorflow_only_warn(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", {"requirements.txt": "tensorflow==2.15\n", "a.py": "x = 1\n"})
    result = resolve_image("cpu", [], model_dir=model)
    assert result.family == "pytorch-ngc"
    assert result.notices[0].startswith("warning: no file imports a framework")


def test_auto_with_a_missing_model_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentResolutionError, match="does not exist"):
        resolve_image("cpu", [], model_dir=tmp_path / "absent")


def test_a_given_manifest_is_used(manifest: Manifest) -> None:
    other = manifest.model_copy(update={"environments_tag": "abc1234"})
    assert resolve_image("cpu", [], manifest=other).image.endswith(":abc1234")
