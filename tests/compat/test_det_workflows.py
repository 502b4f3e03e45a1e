"""The CLI and SDK workflows of a Determined user, with the official 0.38.1 client, on Stalwart.

One real master and one two-slot agent serve the whole module. The trial is
``workflows/trial.py`` (Stalwart's Core API on the agent's own Python): ``steps`` training steps
of ``sleep`` seconds, validation metrics and a checkpoint every second step, ``STEP <n>`` in its
log. The assertions are on what a user relies on (exit codes, states, ids, key lines), not on
table layout.

``workflows/sdk_workflow.py`` runs the ``determined.experimental.client`` calls from the det
venv's Python.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Queue

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import (
    DET_TIMEOUT_S,
    Det,
    MasterProcess,
    describe,
    det_at,
    local_agent,
    logged_in_admin,
    sdk_result,
)

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).parent / "workflows"
AGENT_ID = "workflows"
WAIT_S = 60.0
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LOGIN_REFUSED = "Invalid username/password combination"


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    """A local agent with two slots, attached to the module's master."""
    yield from local_agent(stalwart_master, AGENT_ID, 2)


@pytest.fixture(scope="module")
def admin(
    det_venv: Path,
    stalwart_master: MasterProcess,
    agent: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Det:
    """The official CLI logged in as ``admin`` (empty password), shared by the module."""
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("model")
    shutil.copy(WORKFLOWS / "trial.py", model / "trial.py")
    return model


def _config(directory: Path, name: str, steps: int, sleep: float) -> str:
    path = directory / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        "entrypoint: python3 trial.py\n"
        f"hyperparameters:\n  steps: {steps}\n  sleep: {sleep}\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    return str(path)


def _created_id(done: subprocess.CompletedProcess[str] | str) -> int:
    out = done if isinstance(done, str) else done.stdout
    found = re.search(r"Created experiment (\d+)\n", out)  # what e2e parses
    assert found, out
    return int(found.group(1))


def _experiment(cli: Det, exp_id: int) -> dict[str, object]:
    described = json.loads(cli.ok("experiment", "describe", str(exp_id), "--json").stdout)
    experiment: dict[str, object] = described[0]["experiment"]
    return experiment


def _wait_state(cli: Det, exp_id: int, *states: str) -> str:
    deadline = time.monotonic() + WAIT_S
    state = ""
    while time.monotonic() < deadline:
        state = str(_experiment(cli, exp_id)["state"])
        if state in states:
            return state
        time.sleep(0.2)
    raise AssertionError(f"experiment {exp_id} is {state}, not {states} after {WAIT_S:.0f} s")


def _trial_id(cli: Det, exp_id: int) -> int:
    listed = cli.ok("experiment", "list-trials", str(exp_id)).stdout
    found = re.search(r"^\s*(\d+) \|", listed, re.MULTILINE)
    assert found, listed
    return int(found.group(1))


class Follower:
    """A ``det`` command left running, its stdout lines read as they come."""

    def __init__(self, cli: Det, *args: str) -> None:
        self.process = subprocess.Popen(
            [str(cli.executable), "-m", cli.master.url, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(cli.env),
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._queue: Queue[str | None] = Queue()
        self._stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self._stderr.extend(self.process.stderr)

    def until(self, text: str, timeout: float = WAIT_S) -> str:
        """Read until a line containing ``text``; fail on EOF or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                raise AssertionError(f"no {text!r} within {timeout:.0f} s: {self.lines}") from None
            if line is None:
                raise AssertionError(f"output ended before {text!r}: {self.lines}")
            self.lines.append(line)
            if text in line:
                return line

    def finish(self, timeout: float = WAIT_S) -> tuple[int, str, str]:
        """Wait for the command to exit by itself: (exit code, all stdout, stderr)."""
        code = self.process.wait(timeout=timeout)
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.lines.append(line)
        return code, "".join(self.lines), "".join(self._stderr)

    def stop(self) -> None:
        """Terminate it if it still runs, and release its pipes."""
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=DET_TIMEOUT_S)
        for thread in self._threads:
            thread.join(timeout=DET_TIMEOUT_S)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@dataclass
class Followed:
    """``det experiment create -f`` of a short experiment, and what it showed while running."""

    exp_id: int
    trial_id: int
    stdout: str
    returncode: int
    running_at_first_step: bool


@pytest.fixture(scope="module")
def followed(admin: Det, model_dir: Path) -> Followed:
    config = _config(model_dir.parent, "follow", steps=6, sleep=0.3)
    follower = Follower(admin, "experiment", "create", config, str(model_dir), "-f")
    try:
        created = follower.until("Created experiment")
        follower.until("STEP 1")
        running = follower.process.poll() is None  # streamed while the trial still runs
        code, out, err = follower.finish()
        assert code == 0, f"{out}\n{err}"
    finally:
        follower.stop()
    exp_id = _created_id(created)
    trial = re.search(r"Following first trial with ID (\d+)", out)
    assert trial, out
    return Followed(exp_id, int(trial.group(1)), out, code, running)


# -- users and login ----------------------------------------------------------------------------


def test_user_workflows(admin: Det, det_venv: Path, tmp_path: Path) -> None:
    listed = admin.ok("user", "list").stdout
    assert "admin" in listed
    assert "determined" in listed

    admin.ok("user", "create", "alice", "--password", "Wonder-land1")
    assert "alice" in admin.ok("user", "list").stdout
    alice = det_at(det_venv, admin.master, tmp_path / "alice")
    alice.login("alice", "Wonder-land1")
    assert "You are logged in as user 'alice'" in alice.ok("user", "whoami").stdout
    info = alice.ok("master", "info").stdout  # a non-admin user reads the master too
    assert "clusterId:" in info

    wrong = alice.run("user", "login", "alice", stdin="not-her-password\n")
    assert wrong.returncode != 0, describe(wrong)
    assert LOGIN_REFUSED in wrong.stdout + wrong.stderr, describe(wrong)

    admin.ok("user", "deactivate", "alice")
    inactive = alice.run("user", "login", "alice", stdin="Wonder-land1\n")
    assert inactive.returncode != 0, describe(inactive)
    assert "user is not active" in inactive.stdout + inactive.stderr, describe(inactive)

    admin.ok("user", "activate", "alice")
    alice.login("alice", "Wonder-land1")

    # the admin sets alice's password (the prompt asks twice)
    admin.ok("user", "change-password", "alice", stdin="Looking-glass2\nLooking-glass2\n")
    old = alice.run("user", "login", "alice", stdin="Wonder-land1\n")
    assert old.returncode != 0, describe(old)
    assert LOGIN_REFUSED in old.stdout + old.stderr, describe(old)
    alice.login("alice", "Looking-glass2")
    # and alice changes her own
    alice.ok("user", "change-password", stdin="Rabbit-hole3\nRabbit-hole3\n")
    alice.login("alice", "Rabbit-hole3")
    assert "You are logged in as user 'alice'" in alice.ok("user", "whoami").stdout


# -- a finished experiment, inspected -----------------------------------------------------------


def test_create_follow_streams_while_the_trial_runs(followed: Followed) -> None:
    assert followed.running_at_first_step, followed.stdout
    out = followed.stdout
    assert "Waiting for first trial to begin..." in out
    assert out.index("STEP 1") < out.index("STEP 6") < out.index("DONE")
    assert "Trial log stream ended" in out


def test_list_describe_and_logs(admin: Det, followed: Followed) -> None:
    exp = str(followed.exp_id)
    assert _experiment(admin, followed.exp_id)["state"] == "STATE_COMPLETED"
    listed = admin.ok("experiment", "list").stdout
    assert re.search(rf"^\s*{exp} \|.*\| follow .*\| COMPLETED ", listed, re.MULTILINE), listed

    described = admin.ok("experiment", "describe", exp, "--metrics").stdout
    assert "Validation Metric: loss" in described, described
    assert "0.166667" in described, described  # the last validation loss, 1 / 6

    trials = admin.ok("experiment", "list-trials", exp).stdout
    assert re.search(rf"^\s*{followed.trial_id} \| COMPLETED ", trials, re.MULTILINE), trials
    assert '"steps": 6' in trials

    logs = admin.ok("experiment", "logs", exp).stdout
    assert "STEP 1" in logs
    assert "DONE" in logs


def test_trial_describe_and_logs(admin: Det, followed: Followed) -> None:
    trial = str(followed.trial_id)
    described = admin.ok("trial", "describe", trial, "--metrics").stdout
    assert "COMPLETED" in described
    assert '"steps_completed": 6' in described, described
    assert UUID.search(described), described

    head = admin.ok("trial", "logs", trial, "--head", "2").stdout
    assert [ln.split("|| ", 1)[1] for ln in head.splitlines() if "|| " in ln] == [
        "STEP 1",
        "STEP 2",
    ], head
    tail = admin.ok("trial", "logs", trial, "--tail", "2").stdout
    assert "STEP" not in tail, tail
    assert f"trial {trial} completed" in tail, tail
    everything = admin.ok("trial", "logs", trial).stdout
    assert everything.index("STEP 1") < everything.index("DONE"), everything
    # -f on a finished trial prints everything, then the stream ends by itself
    ended = admin.ok("trial", "logs", trial, "-f").stdout
    assert "DONE" in ended, ended
    assert "Trial log stream ended" in ended, ended


def test_checkpoints(admin: Det, followed: Followed, tmp_path: Path) -> None:
    exp = str(followed.exp_id)
    every = admin.ok("experiment", "list-checkpoints", exp).stdout
    assert len(set(UUID.findall(every))) == 3, every  # steps 2, 4 and 6
    best = admin.ok("experiment", "list-checkpoints", exp, "--best", "1").stdout
    (uuid,) = set(UUID.findall(best))
    assert "0.166667" in best, best  # the smallest loss is the best one

    described = admin.ok("checkpoint", "describe", uuid).stdout
    assert uuid in described, described
    assert '"steps_completed": 6' in described, described

    target = tmp_path / "checkpoint"
    downloaded = admin.ok("checkpoint", "download", uuid, "-o", str(target)).stdout
    assert str(target) in downloaded, downloaded
    assert json.loads((target / "state.json").read_text()) == {"step": 6}


def test_download_model_def(admin: Det, followed: Followed, tmp_path: Path) -> None:
    exp = str(followed.exp_id)
    done = admin.run("experiment", "download-model-def", exp, "--output-dir", str(tmp_path))
    assert done.returncode == 0, describe(done)
    archive = tmp_path / f"experiment_{exp}_model_def.tgz"
    with tarfile.open(archive) as tgz:
        names = [Path(name).name for name in tgz.getnames()]
    assert "trial.py" in names, names


# -- control ------------------------------------------------------------------------------------


def test_paused_activate_pause_kill(admin: Det, model_dir: Path) -> None:
    config = _config(model_dir.parent, "lifecycle", steps=10_000, sleep=0.05)
    created = admin.ok("experiment", "create", config, str(model_dir), "--paused")
    exp_id = _created_id(created)
    exp = str(exp_id)
    assert "Waiting for first trial" not in created.stdout  # no -f: it returns at once
    assert _wait_state(admin, exp_id, "STATE_PAUSED") == "STATE_PAUSED"
    assert re.search(rf"^\s*{exp} \|.*\| PAUSED ", admin.ok("experiment", "list").stdout, re.M)
    trial = str(_trial_id(admin, exp_id))

    assert f"Activated experiment {exp}" in admin.ok("experiment", "activate", exp).stdout
    follower = Follower(admin, "trial", "logs", trial, "-f")
    try:
        follower.until("STEP 2")  # streams while the trial runs
        assert follower.process.poll() is None

        assert f"Paused experiment {exp}" in admin.ok("experiment", "pause", exp).stdout
        follower.until("PREEMPTED")  # the trial stops at its next checkpoint
        _wait_state(admin, exp_id, "STATE_PAUSED")
        admin.ok("experiment", "activate", exp)
        follower.until("RESTORED")  # it resumes from that checkpoint
        follower.until("STEP")

        assert f"Killed experiment {exp}" in admin.ok("experiment", "kill", exp).stdout
        assert _wait_state(admin, exp_id, "STATE_CANCELED") == "STATE_CANCELED"
        code, out, err = follower.finish()  # the stream ends with the trial
    finally:
        follower.stop()
    assert code == 0, f"{out}\n{err}"
    assert "Trial log stream ended" in out, out


def test_create_without_follow_then_cancel(admin: Det, model_dir: Path) -> None:
    config = _config(model_dir.parent, "canceled", steps=10_000, sleep=0.05)
    created = admin.ok("experiment", "create", config, str(model_dir))
    exp_id = _created_id(created)
    assert "Waiting for first trial" not in created.stdout
    trial = str(_trial_id(admin, exp_id))
    deadline = time.monotonic() + WAIT_S
    while "STEP 1" not in admin.ok("trial", "logs", trial).stdout:
        assert time.monotonic() < deadline, "the trial did not start"
        time.sleep(0.2)

    assert f"Canceled experiment {exp_id}" in admin.ok("experiment", "cancel", str(exp_id)).stdout
    assert _wait_state(admin, exp_id, "STATE_CANCELED") == "STATE_CANCELED"
    tail = admin.ok("trial", "logs", trial, "--tail", "5").stdout
    assert "PREEMPTED" in tail, tail  # cancel stops the trial at a checkpoint, not with a kill
    assert re.search(rf"^\s*{exp_id} \|.*\| CANCELED ", admin.ok("experiment", "list").stdout, re.M)


# -- the cluster --------------------------------------------------------------------------------


def test_agent_and_slot_list(admin: Det) -> None:
    agents = admin.ok("agent", "list").stdout
    assert re.search(rf"^\s*{AGENT_ID}\s+\|.*\|\s+2 \|", agents, re.MULTILINE), agents
    slots = admin.ok("slot", "list").stdout
    rows = [line for line in slots.splitlines() if line.strip().startswith(AGENT_ID)]
    assert len(rows) == 2, slots
    assert all("True" in row for row in rows), slots  # enabled


# -- the SDK ------------------------------------------------------------------------------------


def test_sdk_workflow(admin: Det, det_venv: Path, model_dir: Path, tmp_path: Path) -> None:
    result = sdk_result(
        det_venv, admin, WORKFLOWS / "sdk_workflow.py", str(model_dir), str(tmp_path)
    )
    assert result["whoami"] == "admin"
    assert result["wait"] == "ExperimentState.COMPLETED"
    ((_, trial_state),) = result["trials"]
    assert trial_state == "TrialState.COMPLETED"
    steps = [ln.split("|| ", 1)[1] for ln in result["logs"] if "|| STEP" in ln]
    assert steps == ["STEP 1", "STEP 2", "STEP 3", "STEP 4"]
    assert result["head"] == result["logs"][:1]
    assert result["tail"] == result["logs"][-1:]
    assert result["training_steps"] == [1, 2, 3, 4]
    best = result["best"]
    assert best["uuid"] == best["trial_best"] == best["listed_best"]
    assert best["metadata"]["steps_completed"] == 4
    assert best["state"] == "CheckpointState.COMPLETED"
    assert "state.json" in result["downloaded"]
    assert result["state_json"] == {"step": 4}
    assert "STEP 2" in result["followed"]
    assert result["paused"] == "ExperimentState.PAUSED"
    assert "paused state" in result["wait_paused"]
    # active again: RUNNING while the paused run is still stopping, QUEUED (or on to PULLING,
    # STARTING) once it has exited and the new run waits for its slot, as Determined shows it
    active = ("ACTIVE", "QUEUED", "PULLING", "STARTING", "RUNNING")
    assert result["activated"] in {f"ExperimentState.{name}" for name in active}
    assert result["killed"] == "ExperimentState.CANCELED"
