"""``stalwart envs``: driven through the real entry point, stalwart.cli.main.main."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stalwart.cli.main import main
from stalwart.environments import TABLE_PATH, Manifest, load_manifest, render_table
from stalwart.environments.manifest import MANIFEST_PATH

PT = "determinedai/pytorch-ngc-dev"
OLD = "8b3bea3"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI; return (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def manifest() -> Manifest:
    return load_manifest()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A minimal checkout: the manifest, its generated table, and one file with an old tag."""
    root = tmp_path / "repo"
    (root / "src/stalwart/environments").mkdir(parents=True)
    shutil.copy(MANIFEST_PATH, root / "src/stalwart/environments/manifest.yaml")
    (root / TABLE_PATH).parent.mkdir(parents=True)
    (root / TABLE_PATH).write_text(render_table(load_manifest()), encoding="utf-8")
    (root / "values.yaml").write_text(f"a: 1\ncpuImage: {PT}:{OLD}\n", encoding="utf-8")
    return root


BASE = "entrypoint: python3 train.py\nsearcher:\n  name: single\n  metric: loss\n"


def _experiment(tmp_path: Path, text: str, *, base: bool = True) -> Path:
    """An experiment config file: ``text`` after a valid minimal config (unless ``base=False``)."""
    path = tmp_path / "exp.yaml"
    path.write_text((BASE if base else "") + text, encoding="utf-8")
    return path


def _model(tmp_path: Path, files: dict[str, str]) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    for name, text in files.items():
        (model / name).write_text(text, encoding="utf-8")
    return model


def test_list_json(capsys: pytest.CaptureFixture[str], manifest: Manifest) -> None:
    code, out, _ = run(capsys, "envs", "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == len(list(manifest.rows()))
    assert {"family", "frameworks", "device", "image", "follows_environments_tag"} <= set(rows[0])


def test_list_table(capsys: pytest.CaptureFixture[str], manifest: Manifest) -> None:
    code, out, _ = run(capsys, "envs", "list")
    assert code == 0
    assert manifest.default_image("tensorflow", "cuda")[1] in out
    assert "tensorflow-ngc-hpc" in out


def test_resolve_tensorflow_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest: Manifest
) -> None:
    config = _experiment(tmp_path, "name: tf\n")
    model = _model(tmp_path, {"train.py": "import tensorflow as tf\n"})
    code, out, _ = run(capsys, "envs", "resolve", str(config), "--context", str(model))
    assert code == 0
    assert f"image:  {manifest.default_image('tensorflow', 'cuda')[1]}" in out
    assert "device: cuda" in out
    assert "source: manifest default (tensorflow-ngc)" in out
    assert "notice: the model imports TensorFlow (train.py:1: tensorflow)" in out


def test_resolve_conflict_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest: Manifest
) -> None:
    config = _experiment(tmp_path, "name: both\n")
    model = _model(tmp_path, {"a.py": "import torch\n", "b.py": "import keras\n"})
    code, _, err = run(capsys, "envs", "resolve", str(config), "-c", str(model))
    assert code == 1
    assert "Traceback" not in err
    assert manifest.default_image("pytorch", "cuda")[1] in err
    assert manifest.default_image("tensorflow", "cuda")[1] in err
    assert "framework: tensorflow" in err


def test_resolve_pinned_image_zero_slots_and_device(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = _experiment(
        tmp_path,
        "environment:\n  image:\n    cpu: me/cpu:1\n    gpu: me/gpu:1\n"
        "resources:\n  slots_per_trial: 0\n",
    )
    code, out, _ = run(capsys, "envs", "resolve", str(config))
    assert code == 0
    assert "image:  me/cpu:1" in out
    assert "source: experiment" in out
    code, out, _ = run(capsys, "envs", "resolve", str(config), "--device", "cuda", "--json")
    assert json.loads(out)["image"] == "me/gpu:1"


def test_resolve_framework_setting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest: Manifest
) -> None:
    config = _experiment(tmp_path, "environment:\n  framework: tensorflow\n")
    code, out, _ = run(capsys, "envs", "resolve", str(config), "--device", "rocm")
    assert code == 0
    assert manifest.default_image("tensorflow", "rocm")[1] in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("environment:\n  framework: jax\n", "environment.framework"),
        ("environment:\n  image:\n    tpu: x\n", "unknown key"),
        ("- a\n", "mapping"),
        ("a: [\n", "YAML syntax error"),
    ],
)
def test_resolve_bad_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = _experiment(tmp_path, text, base=not text.startswith("-"))
    code, _, err = run(capsys, "envs", "resolve", str(path))
    assert code == 1
    assert message in err
    assert "Traceback" not in err


def test_table_prints_and_writes(capsys: pytest.CaptureFixture[str], checkout: Path) -> None:
    code, out, _ = run(capsys, "envs", "table", "--root", str(checkout))
    assert code == 0
    assert out == render_table(load_manifest())
    (checkout / TABLE_PATH).unlink()
    code, _, _ = run(capsys, "envs", "table", "--write", "--root", str(checkout))
    assert code == 0
    assert (checkout / TABLE_PATH).read_text(encoding="utf-8") == out


def test_check_reports_then_bump_fixes(
    capsys: pytest.CaptureFixture[str], checkout: Path, manifest: Manifest
) -> None:
    tag = manifest.environments_tag
    code, out, err = run(capsys, "envs", "check", "--root", str(checkout))
    assert code == 1
    assert f"values.yaml:2: {PT}:{OLD} (manifest says {PT}:{tag})" in out
    assert "1 stale image reference" in err

    code, out, _ = run(capsys, "envs", "bump", "abc1234", "--root", str(checkout))
    assert code == 0
    assert f"values.yaml:2: {PT}:{OLD} -> {PT}:abc1234" in out
    assert f"environments_tag: {tag} -> environments_tag: abc1234" in out
    assert f"{TABLE_PATH}: regenerated" in out
    assert f"environments tag {tag} -> abc1234: 3 change(s) in 3 file(s)" in out

    code, out, _ = run(capsys, "envs", "check", "--root", str(checkout))
    assert code == 0
    assert "OK" in out
    assert "abc1234" in out


def test_bump_rejects_a_bad_tag(capsys: pytest.CaptureFixture[str], checkout: Path) -> None:
    code, _, err = run(capsys, "envs", "bump", "bad tag", "--root", str(checkout))
    assert code == 1
    assert "not a valid image tag" in err


def test_resolve_names_the_template_as_the_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = _experiment(tmp_path, "environment:\n  image:\n    cpu: mine/cpu:1\n")
    template = tmp_path / "tpl.yaml"
    template.write_text("environment:\n  image:\n    cuda: site/cuda:7\n", encoding="utf-8")
    code, out, _ = run(capsys, "envs", "resolve", str(config), "-t", str(template), "--json")
    assert code == 0
    assert json.loads(out)["image"] == "site/cuda:7"
    assert json.loads(out)["source"] == "template"
    code, out, _ = run(
        capsys, "envs", "resolve", str(config), "-t", str(template), "--device", "cpu", "--json"
    )
    assert (json.loads(out)["image"], json.loads(out)["source"]) == ("mine/cpu:1", "experiment")
