"""Every example's configs pass ``stalwart config check``, and every example has a README that
names each of its configs and scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.cli.main import main
from tests.examples.conftest import EXAMPLES

CONFIGS = sorted(EXAMPLES.glob("*/*.yaml"))
DIRECTORIES = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_the_examples_are_there() -> None:
    assert [d.name for d in DIRECTORIES] == ["core_api", "pytorch_mnist", "tensorflow"]
    assert len(CONFIGS) >= 10


def exit_code(args: list[str]) -> int:
    """Run ``stalwart ARGS`` in this process; its exit code."""
    try:
        main(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_config_check_passes(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = exit_code(["config", "check", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == f"{path}: ok"


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda p: p.name)
def test_the_readme_names_every_file(directory: Path) -> None:
    readme = (directory / "README.md").read_text(encoding="utf-8")
    for path in sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.py")):
        assert f"`{path.name}`" in readme or f" {path.name}" in readme, path.name
