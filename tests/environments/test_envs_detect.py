"""detect_frameworks: a static scan of a model directory's imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.environments import detect_frameworks
from stalwart.environments.detect import framework_of_module
from stalwart.errors import EnvironmentResolutionError


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_tensorflow_only(tmp_path: Path) -> None:
    scan = detect_frameworks(_write(tmp_path, {"model.py": "import os\nimport tensorflow as tf\n"}))
    assert scan.frameworks == {"tensorflow"}
    assert [str(e) for e in scan.imports] == ["model.py:2: tensorflow"]
    assert scan.files_scanned == 1
    assert not scan.truncated


def test_pytorch_only(tmp_path: Path) -> None:
    scan = detect_frameworks(_write(tmp_path, {"pkg/train.py": "import torch.nn as nn\n"}))
    assert scan.frameworks == {"pytorch"}
    assert scan.evidence("pytorch")[0].path == "pkg/train.py"


def test_both(tmp_path: Path) -> None:
    scan = detect_frameworks(_write(tmp_path, {"a.py": "import torch\n", "b.py": "import keras\n"}))
    assert scan.frameworks == {"pytorch", "tensorflow"}


def test_neither(tmp_path: Path) -> None:
    scan = detect_frameworks(_write(tmp_path, {"a.py": "import numpy\nimport torchx\n"}))
    assert scan.frameworks == frozenset()
    assert scan.imports == []


@pytest.mark.parametrize(
    ("source", "framework"),
    [
        ("from tensorflow import keras\n", "tensorflow"),
        ("import keras\n", "tensorflow"),
        ("import tf_keras as keras\n", "tensorflow"),
        ("from determined.keras import TFKerasTrial\n", "tensorflow"),
        ("from determined import estimator\n", "tensorflow"),
        ("import importlib\nm = importlib.import_module('tensorflow')\n", "tensorflow"),
        ("from importlib import import_module\nimport_module('keras.layers')\n", "tensorflow"),
        ("t = __import__('torch')\n", "pytorch"),
        ("from determined import pytorch\n", "pytorch"),
        ("from determined.pytorch import PyTorchTrial\n", "pytorch"),
        ("import stalwart.pytorch\n", "pytorch"),
        ("import pytorch_lightning as pl\n", "pytorch"),
        ("from lightning import Trainer\n", "pytorch"),
        ("def f():\n    import torch\n", "pytorch"),
    ],
)
def test_import_forms(tmp_path: Path, source: str, framework: str) -> None:
    assert detect_frameworks(_write(tmp_path, {"m.py": source})).frameworks == {framework}


@pytest.mark.parametrize(
    "source",
    [
        "from . import torch\n",
        "from .tensorflow import thing\n",
        "import determined\nfrom determined import core\n",
        "name = 'tensorflow'\n",
        "importlib.import_module(name)\n",
    ],
)
def test_not_framework_imports(tmp_path: Path, source: str) -> None:
    assert detect_frameworks(_write(tmp_path, {"m.py": source})).frameworks == frozenset()


def test_a_file_that_does_not_parse_is_skipped_with_a_note(tmp_path: Path) -> None:
    _write(tmp_path, {"bad.py": "def broken(:\n", "good.py": "import tensorflow\n"})
    (tmp_path / "latin.py").write_bytes(b"x = '\xff'\n")
    scan = detect_frameworks(tmp_path)
    assert scan.frameworks == {"tensorflow"}
    assert any(n.startswith("skipped bad.py: not valid Python (line 1") for n in scan.notes)
    assert any(n.startswith("skipped latin.py") for n in scan.notes)


def test_skipped_directories(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            ".git/hooks/x.py": "import torch\n",
            ".venv/lib/a.py": "import torch\n",
            "myenv/pyvenv.cfg": "home = /usr\n",
            "myenv/lib/b.py": "import torch\n",
            "__pycache__/c.py": "import torch\n",
            "lib/site-packages/d.py": "import torch\n",
            ".hidden/e.py": "import torch\n",
            "src/model.py": "import tensorflow\n",
        },
    )
    scan = detect_frameworks(tmp_path)
    assert scan.frameworks == {"tensorflow"}
    assert scan.files_scanned == 1


def test_size_and_count_limits(tmp_path: Path) -> None:
    _write(tmp_path, {f"m{i}.py": "import torch\n" for i in range(5)})
    _write(tmp_path, {"big.py": "import tensorflow\n" + "x = 1\n" * 100})
    scan = detect_frameworks(tmp_path, max_file_bytes=200)
    assert scan.frameworks == {"pytorch"}
    assert "skipped big.py: larger than 200 bytes" in scan.notes
    limited = detect_frameworks(tmp_path, max_files=2)
    assert limited.truncated
    assert limited.files_scanned == 2
    assert any("stopped after 2" in n for n in limited.notes)


def test_dependencies_are_weaker_evidence(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "requirements.txt": "# deps\ntensorflow-cpu>=2.15  # comment\nnumpy\n",
            "pyproject.toml": '[project]\nname = "m"\ndependencies = ["torch>=2"]\n',
            "m.py": "x = 1\n",
        },
    )
    scan = detect_frameworks(tmp_path)
    assert scan.frameworks == frozenset()
    assert scan.declared == {"tensorflow", "pytorch"}
    assert [str(e) for e in scan.requirements] == [
        "requirements.txt:2: tensorflow_cpu",
        "pyproject.toml:3: torch",
    ]


def test_a_single_file(tmp_path: Path) -> None:
    _write(tmp_path, {"one.py": "import keras\n", "two.py": "import torch\n"})
    assert detect_frameworks(tmp_path / "one.py").frameworks == {"tensorflow"}


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentResolutionError):
        detect_frameworks(tmp_path / "absent")


@pytest.mark.parametrize(
    ("module", "framework"),
    [
        ("torch", "pytorch"),
        ("torch.nn.functional", "pytorch"),
        ("torchx", None),
        ("tensorflow.keras.layers", "tensorflow"),
        ("tensorflow_datasets", None),
        ("determined", None),
        ("determined.pytorch.deepspeed", "pytorch"),
    ],
)
def test_framework_of_module(module: str, framework: str | None) -> None:
    assert framework_of_module(module) == framework
