"""Fixtures of the CLI tests: one real master and agent shared by the package, and ``cli``,
which runs ``stalwart`` in-process through its real entry point (:func:`stalwart.cli.main.main`,
the one catch point for errors) and returns the exit code, stdout and stderr.

Each test gets its own token cache, logged in as ``admin`` (empty password), so logging in and
out in one test does not change who the others are.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stalwart.cli.main import main
from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.client.support import CONFIG, make_model_dir, running_cluster


@dataclass(frozen=True)
class Result:
    """What one ``stalwart`` invocation did."""

    code: int
    out: str
    err: str


class Cli:
    """Runs ``stalwart -m <master> ARGS...`` in this process."""

    def __init__(
        self, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.url = url
        self._capsys = capsys
        self._monkeypatch = monkeypatch

    def __call__(self, *args: str, stdin: str | None = None, master: bool = True) -> Result:
        if stdin is not None:
            self._monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        self._capsys.readouterr()
        argv = ["-m", self.url, *args] if master else list(args)
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = self._capsys.readouterr()
        return Result(code, captured.out, captured.err)


def one_error_line(err: str) -> str:
    """stderr of a failed command: one ``error:`` line, at most one ``hint:`` line; the first."""
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: "), err
    assert len(lines) <= 2, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("cli-cluster")) as running:
        yield running


@pytest.fixture(scope="package")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="package")
def admin(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    config_dir = tmp_path_factory.mktemp("admin-config")
    with Client(cluster.url, "admin", "", config_dir=config_dir, environ={}) as client:
        yield client


@pytest.fixture(scope="package")
def finished(admin: Client, model_dir: Path) -> Experiment:
    """A single-trial experiment run to COMPLETED (one trial, a checkpoint at batch 4)."""
    exp = admin.create_experiment(CONFIG, model_dir)
    assert exp.wait(timeout=90, interval=0.1) == "COMPLETED"
    return exp


@pytest.fixture
def cli(
    cluster: LocalCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    """``stalwart`` against the package's cluster, logged in as admin in a private cache."""
    config_dir = tmp_path / "xdg" / "stalwart"
    for name in ("STALWART_MASTER", "DET_MASTER", "DET_USER", "DET_PASS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_dir.parent))
    monkeypatch.setenv("COLUMNS", "250")
    with Client(cluster.url, config_dir=config_dir, environ={}) as client:
        client.login("admin", "")
    return Cli(cluster.url, capsys, monkeypatch)
