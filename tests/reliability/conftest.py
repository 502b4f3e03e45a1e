"""Fault-test fixtures: real master and agent processes (:class:`LocalCluster`) with short timeouts.

Every test here kills something for real (a trial, an agent, the master, PostgreSQL backends)
and checks what users rely on afterwards. Each one is bounded: the master runs a 0.3 s
scheduling tick and loses agents after 3 s, trials are a few seconds of tiny steps, and every
wait has a timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import free_port

TRIALS = Path(__file__).parent / "trials"

MASTER_CONFIG = """\
cluster:
  agent_timeout: 3
  preemption_timeout: 30
  kill_grace: 2
  tick: 0.3
"""


def steady_files() -> dict[str, str]:
    """The model definition: ``trials/steady.py`` as ``train.py``."""
    return {"train.py": (TRIALS / "steady.py").read_text()}


def experiment_config(searcher: str, hparams: str, **extra: str) -> str:
    """An experiment running ``train.py`` on one slot."""
    lines = [
        "name: reliability",
        "entrypoint: python3 train.py",
        "resources:",
        "  slots_per_trial: 1",
        "hyperparameters:",
        hparams,
        "searcher:",
        searcher,
    ]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def steps(api: Api, trial_id: int, group: str = "training") -> list[int]:
    """The ``steps_completed`` of every stored report of a group, in order."""
    return [int(m["totalBatches"]) for m in api.metrics(trial_id, group)]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


class Pids:
    """The pid files that ``steady.py`` writes: ``<trial id>-<run id>.pid``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def runs(self, trial_id: int) -> dict[int, int]:
        """``{run id: pid}`` of every run of a trial so far."""
        out: dict[int, int] = {}
        for path in self.root.glob(f"{trial_id}-*.pid"):
            text = path.read_text().strip()
            if text:
                out[int(path.stem.split("-")[1])] = int(text)
        return out

    def all(self) -> dict[tuple[int, int], int]:
        """``{(trial id, run id): pid}`` of every run so far."""
        out: dict[tuple[int, int], int] = {}
        for path in self.root.glob("*.pid"):
            text = path.read_text().strip()
            if text:
                trial, run = path.stem.split("-")
                out[(int(trial), int(run))] = int(text)
        return out

    def kill(self, trial_id: int, run_id: int) -> int:
        """SIGKILL one run of a trial; its pid."""
        pid = self.runs(trial_id)[run_id]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pid


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[Pids]:
    """The trials' pid files; trial processes still alive at the end are SIGKILLed (the runs of
    a SIGKILLed agent outlive it)."""
    files = Pids(tmp_path / "pids")
    try:
        yield files
    finally:
        for pid in files.all().values():
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def make_cluster(
    tmp_path: Path, config: str = MASTER_CONFIG, db: str | None = None
) -> LocalCluster:
    """A master (not started) with ``config`` as its master configuration."""
    path = tmp_path / "master.yaml"
    path.write_text(config)
    return LocalCluster(home=tmp_path / "home", port=free_port(), db=db, master_config=path)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    """A running master with no agents yet (stopped, agents included, afterwards)."""
    cluster = make_cluster(tmp_path)
    cluster.start_master()
    try:
        yield cluster
    finally:
        cluster.stop()


_LOG_TAIL_LINES = 200


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """Attach the tails of the master's and agents' logs to the report of a failed test that
    used a :class:`LocalCluster` (what a CI failure needs to be understood)."""
    outcome = yield
    report = outcome.get_result()
    cluster = getattr(item, "funcargs", {}).get("local")
    if not report.failed or not isinstance(cluster, LocalCluster):
        return
    for path in sorted((cluster.home / "logs").glob("*.log")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        report.sections.append(
            (f"{path.name} (last {_LOG_TAIL_LINES} lines)", "\n".join(lines[-_LOG_TAIL_LINES:]))
        )


@pytest.fixture
def api(local: LocalCluster) -> Iterator[Api]:
    client = Api(local.url)
    try:
        yield client
    finally:
        client.close()
