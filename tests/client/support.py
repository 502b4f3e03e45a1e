"""Shared by the SDK and CLI tests: a real master and agent, a model definition, a config.

The model definition is ``tests/integration/trials/train.py`` (a tiny Core API script) plus
files its ``.stalwartignore`` and ``.detignore`` leave out.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stalwart.local import LocalCluster
from tests.integration.conftest import MASTER_CONFIG, TRIALS, free_port

__all__ = ["CONFIG", "make_model_dir", "running_cluster"]

CONFIG = """\
name: tiny
entrypoint: python3 train.py
hyperparameters:
  steps: 4
  period: 2
  x: 0.5
searcher:
  name: single
  metric: loss
  smaller_is_better: true
"""
"""A single-trial experiment that runs in about a second."""


def make_model_dir(root: Path) -> Path:
    """A context directory: ``train.py``, ``const.yaml``, ignored data and ignore files."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(TRIALS / "train.py", root / "train.py")
    (root / "const.yaml").write_text(CONFIG)
    (root / ".stalwartignore").write_text("data/\n*.ckpt\n")
    (root / ".detignore").write_text("notes.txt\n")
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "big.bin").write_bytes(b"\0" * 1024)
    (root / "model.ckpt").write_text("ignored")
    (root / "notes.txt").write_text("ignored")
    return root


@contextmanager
def running_cluster(home: Path, *, slots: int = 2) -> Iterator[LocalCluster]:
    """A master and one agent (``slots`` CPU slots) until the block ends."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=home / "home", port=free_port(), master_config=config)
    try:
        cluster.start_master()
        cluster.start_agent("a1", slots=slots)
        yield cluster
    finally:
        cluster.stop()
