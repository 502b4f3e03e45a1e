"""Determined's Core API tutorial, unchanged, on ``stalwart up``, with the official ``det`` CLI.

What a Determined user does to try Stalwart on a laptop: ``stalwart up``, then
``det e create <stage>.yaml .`` for each stage of Determined's own tutorial
(``tests/fixtures/determined_core_api``, byte for byte). Their scripts ``import determined``;
the local agent builds the official harness's environment on first use (pip, from its
configured sources) and runs them with it. So that later runs reuse it, as a user's later
experiments do, it lives in ``<repo>/.cache/determined-env`` (``STALWART_DETERMINED_ENV``; by
default it would be under ``~/.cache/stalwart``, or ``/var/cache/stalwart`` for a root agent):
delete that folder to see the first use again.

The one flag: ``4_distributed.yaml`` asks for ``slots_per_trial: 8``, and an agent without GPUs
offers one CPU slot unless told otherwise (as Determined's does), so ``up`` gets ``--slots 8``
(asking for more than the agents have makes ``det`` warn, as Determined's master does). All five
experiments are created at once and share those slots.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.agent.determined_env import MARKER, DeterminedEnv
from tests.compat.conftest import (
    Det,
    MasterProcess,
    _clean_env,
    _free_port,
    _stalwart_executable,
    describe,
    det_at,
)
from tests.integration.api import Api

pytestmark = pytest.mark.compat

TUTORIAL = Path(__file__).resolve().parents[1] / "fixtures" / "determined_core_api"
STAGES = ("0_start", "1_metrics", "2_checkpoints", "3_hpsearch", "4_distributed")
WAIT_S = 600.0
SLOTS_WARNING = "Warning: The requested job requires more slots than currently available."
DETERMINED_ENV = Path(__file__).resolve().parents[2] / ".cache" / "determined-env"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """``stalwart up --slots 8`` in the foreground, as a user starts it (a fresh ``HOME``)."""
    work = tmp_path_factory.mktemp("tutorial")
    env = _clean_env(work)
    env["STALWART_DETERMINED_ENV"] = str(DETERMINED_ENV)
    port = _free_port()
    log_path = work / "up.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [_stalwart_executable(), "up", "--port", str(port), "--slots", "8"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=work,
        )
    home = work / ".stalwart"
    master = MasterProcess(
        url=f"http://127.0.0.1:{port}", home=home, log_path=log_path, process=process
    )
    try:
        _wait_up(master)
        yield master
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_up(master: MasterProcess) -> None:
    deadline = time.monotonic() + 120
    while "Stalwart is up at" not in master.log():
        if master.process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"`stalwart up` did not come up:\n{master.log()}", pytrace=False)
        time.sleep(0.2)


@pytest.fixture(scope="module")
def det(det_venv: Path, up: MasterProcess, tmp_path_factory: pytest.TempPathFactory) -> Det:
    """The official ``det``, logged in as ``admin`` (empty password), as the README does."""
    cli = det_at(det_venv, up, tmp_path_factory.mktemp("det"))
    cli.login("admin")
    return cli


@pytest.fixture(scope="module")
def api(up: MasterProcess) -> Iterator[Api]:
    client = Api(up.url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def experiments(det: Det, api: Api) -> dict[str, int]:
    """Each stage created with ``det e create <stage>.yaml <tutorial dir>``, all at once; waits
    until every one is COMPLETED (the trials' logs in the message otherwise)."""
    ids: dict[str, int] = {}
    for stage in STAGES:
        done = det.run("experiment", "create", str(TUTORIAL / f"{stage}.yaml"), str(TUTORIAL))
        assert done.returncode == 0, describe(done)
        assert SLOTS_WARNING not in done.stderr  # the eight slots suffice
        ids[stage] = int(re.findall(r"Created experiment (\d+)", done.stdout)[0])
    for stage, exp_id in ids.items():
        exp = api.wait_state(exp_id, timeout=WAIT_S)
        if exp["state"] != "STATE_COMPLETED":
            logs = "\n".join(api.logs(t["id"])[-4000:] for t in api.trials(exp_id))
            raise AssertionError(f"{stage} (experiment {exp_id}) ended {exp['state']}:\n{logs}")
    return ids


def _values(api: Api, trial_id: int, group: str = "training") -> list[tuple[int, float]]:
    """``(steps_completed, x)`` of each report of ``group``, in order."""
    key = "avg_metrics" if group == "training" else "validation_metrics"
    return [(int(m["totalBatches"]), m["metrics"][key]["x"]) for m in api.metrics(trial_id, group)]


def test_stage_0_a_plain_script_runs_to_the_end(experiments: dict[str, int], api: Api) -> None:
    (trial,) = api.trials(experiments["0_start"])
    assert "x is now 100" in api.logs(trial["id"])


def test_stage_1_metrics_and_log_levels(experiments: dict[str, int], api: Api) -> None:
    (trial,) = api.trials(experiments["1_metrics"])
    assert _values(api, trial["id"]) == [(n, n) for n in range(10, 101, 10)]
    assert _values(api, trial["id"], "validation") == [(100, 100)]
    logs = api.logs(trial["id"])
    for level in ("debug", "info", "warning", "error"):
        assert f"{level}-level message" in logs
    assert api.experiment(experiments["1_metrics"])["progress"] == pytest.approx(1.0)


def test_stage_2_checkpoints(experiments: dict[str, int], api: Api, up: MasterProcess) -> None:
    exp_id = experiments["2_checkpoints"]
    (trial,) = api.trials(exp_id)
    checkpoints = api.checkpoints(exp_id)
    assert sorted(c["metadata"]["steps_completed"] for c in checkpoints) == list(range(10, 101, 10))
    kept = [c for c in checkpoints if c["state"] == "STATE_COMPLETED"]
    assert kept
    for checkpoint in kept:  # the tutorial's own file, in the default shared_fs storage
        state = (up.home / "checkpoints" / checkpoint["uuid"] / "state").read_text()
        steps = checkpoint["metadata"]["steps_completed"]
        assert state == f"{steps},{steps},{trial['id']}"


def test_stage_3_an_adaptive_asha_search(experiments: dict[str, int], api: Api) -> None:
    trials = api.trials(experiments["3_hpsearch"])
    assert len(trials) == 10  # max_trials
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    lengths = sorted(max(n for n, _ in _values(api, t["id"], "validation")) for t in trials)
    assert lengths[-1] == 100  # the best trials train to max_time
    assert lengths[0] < 100  # and ASHA stopped others early
    for trial in trials:
        step = trial["hparams"]["increment_by"]
        assert 1 <= step <= 8
        assert all(x == n * step for n, x in _values(api, trial["id"], "validation"))


def test_stage_4_eight_workers_allgather(experiments: dict[str, int], api: Api) -> None:
    (trial,) = api.trials(experiments["4_distributed"])
    step = trial["hparams"]["increment_by"]
    # every batch adds the allgathered increments of all eight workers
    assert _values(api, trial["id"], "validation")[-1] == (100, 100 * 8 * step)
    logs = api.logs(trial["id"])
    assert logs.count("worker starting") == 8


def test_more_slots_than_the_agents_have_is_a_warning(det: Det, api: Api) -> None:
    """What ``4_distributed.yaml`` tells a user whose ``stalwart up`` has fewer slots than it
    asks for: the experiment is created, and ``det`` says it needs more slots."""
    done = det.run(
        "experiment",
        "create",
        str(TUTORIAL / "4_distributed.yaml"),
        str(TUTORIAL),
        "--config",
        "resources.slots_per_trial=16",
        "--paused",
    )
    assert done.returncode == 0, describe(done)
    assert SLOTS_WARNING in done.stderr
    exp_id = int(re.findall(r"Created experiment (\d+)", done.stdout)[0])
    assert api.experiment(exp_id)["state"] == "STATE_PAUSED"


def test_the_harness_environment_is_built_once_and_reused(
    experiments: dict[str, int], api: Api
) -> None:
    assert (DETERMINED_ENV / MARKER).is_file()
    logs = {
        stage: [api.logs(t["id"]) for t in api.trials(exp_id)]
        for stage, exp_id in experiments.items()
    }
    built = [
        stage
        for stage, texts in logs.items()
        for text in texts
        if "preparing the official Determined harness" in text
    ]
    assert len(built) <= 1, built  # by the first task that needed it (none: an earlier run)
    # Stalwart's own environment has no determined: those stages ran with the built one
    assert importlib.util.find_spec("determined") is None


def test_an_environment_of_ones_own_with_determined_is_used_as_it_is(det_venv: Path) -> None:
    """``STALWART_DETERMINED_ENV`` naming a venv the user made (here the det venv): its Python
    runs the tasks, and nothing is built or written there."""
    before = sorted(p.name for p in det_venv.iterdir())
    env = DeterminedEnv(det_venv)
    assert env.ready() is None  # not one Stalwart built: looked at once, on first need
    python = env.ensure(lambda line: pytest.fail(f"built: {line}"))
    assert python == det_venv / "bin" / "python3"
    assert env.ready() == python
    assert sorted(p.name for p in det_venv.iterdir()) == before
