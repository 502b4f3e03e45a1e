"""How tasks run, with the official ``det`` CLI (0.38.1) against a real master and two real
agents: startup hooks, log policies and Determined's failure wording.

The master's ``default`` pool sets ``task_container_defaults.startup_hook`` (the master's own is
overridden by it, as Determined merges a pool's defaults over the master's). Each experiment is
a shell entrypoint that exits at once, so the module runs in seconds per experiment.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, _start_master, _stop, describe
from tests.compat.test_det_workflows import (
    UUID,
    _created_id,
    _trial_id,
    _wait_state,
    admin,
)
from tests.integration.api import Api

__all__ = ["admin"]  # logged in as admin, on this module's master and agents

pytestmark = pytest.mark.compat

AGENTS = ("node-a", "node-b")
MASTER_CONFIG = """\
task_container_defaults:
  startup_hook: export HOOKED_BY=master
resource_pools:
  - pool_name: default
    task_container_defaults:
      startup_hook: |
        export HOOKED_BY=pool
"""


@pytest.fixture(scope="module")
def stalwart_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """A master whose default pool has a startup hook."""
    workdir = tmp_path_factory.mktemp("master")
    config = workdir / "master.yaml"
    config.write_text(MASTER_CONFIG, encoding="utf-8")
    master = _start_master(workdir, ["--config", str(config)])
    try:
        yield master
    finally:
        _stop(master.process)


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    """Two one-slot agents (``exclude_node`` needs somewhere else to go)."""
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    for agent_id in AGENTS:
        cluster.start_agent(agent_id, slots=1)
    try:
        yield cluster
    finally:
        for agent_id in AGENTS:
            cluster.stop_agent(agent_id)


@pytest.fixture(scope="module")
def api(stalwart_master: MasterProcess, agent: LocalCluster) -> Iterator[Api]:
    client = Api(stalwart_master.url)
    try:
        yield client
    finally:
        client.close()


def _experiment(cli: Det, directory: Path, name: str, body: str) -> int:
    """Create experiment ``name`` from ``body`` (config lines after the name) and ``directory``."""
    config = directory / f"{name}.yaml"
    config.write_text(
        f"name: {name}\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n" + body,
        encoding="utf-8",
    )
    return _created_id(cli.ok("experiment", "create", str(config), str(directory)))


def _trial_logs(cli: Det, trial_id: int) -> str:
    return cli.ok("trial", "logs", str(trial_id)).stdout


def test_startup_hooks_run_before_the_entrypoint_in_order(admin: Det, tmp_path: Path) -> None:
    """The pool's hook, then the model definition's ``startup-hook.sh``; what they export is
    the entrypoint's environment."""
    (tmp_path / "startup-hook.sh").write_text('export FROM_CONTEXT="context after $HOOKED_BY"\n')
    exp_id = _experiment(
        admin,
        tmp_path,
        "hooked",
        "max_restarts: 0\n"
        "entrypoint: >-\n"
        '  echo "entrypoint sees: $FROM_CONTEXT"; test "$FROM_CONTEXT" = "context after pool"\n',
    )
    state = _wait_state(admin, exp_id, "STATE_COMPLETED", "STATE_ERROR")
    logs = _trial_logs(admin, _trial_id(admin, exp_id))
    assert state == "STATE_COMPLETED", logs
    assert "entrypoint sees: context after pool" in logs


def test_a_failing_startup_hook_fails_the_command_with_a_clear_line(
    admin: Det, tmp_path: Path
) -> None:
    (tmp_path / "startup-hook.sh").write_text("echo preparing\nfalse\necho never here\n")
    done = admin.run("cmd", "run", "-c", str(tmp_path), "echo the command ran")
    out = done.stdout + done.stderr
    assert "preparing" in out, describe(done)
    assert "the command ran" not in out, describe(done)
    assert "never here" not in out, describe(done)
    assert "the startup hook startup-hook.sh failed with exit code 1" in out, describe(done)
    assert "container failed with non-zero exit code: 1" in out, describe(done)
    command_id = UUID.search(done.stdout)
    assert command_id is not None, describe(done)


def test_a_failed_trial_has_determined_wording_and_stalwart_wording(
    admin: Det, tmp_path: Path
) -> None:
    """``det e create --test`` prints the failed trial's logs, as Determined's e2e tests grep."""
    config = tmp_path / "exit3.yaml"
    config.write_text(
        "name: exit3\nentrypoint: exit 3\nmax_restarts: 0\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n",
        encoding="utf-8",
    )
    done = admin.run("experiment", "create", "--test", str(config), str(tmp_path), timeout=120)
    assert done.returncode != 0, describe(done)
    created = re.search(r"Created test experiment (\d+)", done.stdout)
    assert created, describe(done)
    trial_id = _trial_id(admin, int(created.group(1)))
    for text in (done.stdout, _trial_logs(admin, trial_id)):
        assert "resources failed with non-zero exit code" in text, text
        assert "container failed with non-zero exit code: 3 (exit code 3)" in text, text
        assert f"trial {trial_id} failed (it exited with code 3)" in text, text


def test_cancel_retries_stops_restarts_and_labels_the_trial(
    admin: Det, api: Api, tmp_path: Path
) -> None:
    exp_id = _experiment(
        admin,
        tmp_path,
        "no-retry",
        "max_restarts: 3\n"
        "log_policies:\n"
        "  - name: fatal config\n    pattern: FATAL-CONFIG-ERROR\n    action: cancel_retries\n"
        "entrypoint: echo FATAL-CONFIG-ERROR in the data path; exit 1\n",
    )
    assert _wait_state(admin, exp_id, "STATE_ERROR", "STATE_COMPLETED") == "STATE_ERROR"
    trial_id = _trial_id(admin, exp_id)
    trial = api.get(f"/api/v1/trials/{trial_id}")["trial"]
    assert trial["restarts"] == 0, trial
    assert trial["logPolicyMatched"] == "fatal config", trial
    logs = _trial_logs(admin, trial_id)
    assert "trial failed and matched logs to a don't retry policy" in logs
    assert '(log "FATAL-CONFIG-ERROR in the data path" matched regex "FATAL-CONFIG-ERROR")' in logs
    assert "cancel_retries log policy, so it is not restarted" in logs


def test_exclude_node_retries_on_another_agent_and_default_policies_label(
    admin: Det, api: Api, tmp_path: Path
) -> None:
    """The first run fails on one agent with a line an ``exclude_node`` policy matches; the
    restart runs on the other agent, and prints a CUDA out-of-memory line: Determined's default
    policy labels the trial ``CUDA OOM``."""
    mark = tmp_path / "first-run-done"
    exp_id = _experiment(
        admin,
        tmp_path,
        "exclude",
        "max_restarts: 1\n"
        "resources:\n  slots_per_trial: 1\n"
        "log_policies:\n"
        "  - name: broken node\n    pattern: NODE-BROKEN\n    action: exclude_node\n"
        "entrypoint: >-\n"
        f'  if [ -e {mark} ]; then echo "second run on $DET_AGENT_ID";\n'
        "  echo 'RuntimeError: CUDA out of memory. Tried to allocate 2 MiB'; exit 0; fi;\n"
        f'  touch {mark}; echo "NODE-BROKEN on $DET_AGENT_ID"; exit 1\n',
    )
    state = _wait_state(admin, exp_id, "STATE_COMPLETED", "STATE_ERROR")
    trial_id = _trial_id(admin, exp_id)
    logs = _trial_logs(admin, trial_id)
    assert state == "STATE_COMPLETED", logs
    first = re.search(r"NODE-BROKEN on (\S+)", logs)
    second = re.search(r"second run on (\S+)", logs)
    assert first, logs
    assert second, logs
    assert {first.group(1), second.group(1)} == set(AGENTS), logs
    assert f"therefore will not schedule on {first.group(1)}" in logs
    trial = api.get(f"/api/v1/trials/{trial_id}")["trial"]
    assert trial["restarts"] == 1, trial
    assert trial["logPolicyMatched"] == "CUDA OOM", trial
    listed = api.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
    assert [t["logPolicyMatched"] for t in listed] == ["CUDA OOM"], json.dumps(listed)


def test_exclude_node_with_no_agent_left_errors_the_trial(admin: Det, tmp_path: Path) -> None:
    """Both agents logged the line: the trial cannot restart anywhere, so it is ERROR with
    Determined's capacity message (its ``launch_error``), not left waiting forever."""
    exp_id = _experiment(
        admin,
        tmp_path,
        "nowhere",
        "max_restarts: 5\n"
        "log_policies:\n"
        "  - name: broken node\n    pattern: NODE-BROKEN\n    action: exclude_node\n"
        'entrypoint: echo "NODE-BROKEN on $DET_AGENT_ID"; exit 1\n',
    )
    assert _wait_state(admin, exp_id, "STATE_ERROR", "STATE_COMPLETED") == "STATE_ERROR"
    trial_id = _trial_id(admin, exp_id)
    logs = _trial_logs(admin, trial_id)
    assert sorted(re.findall(r"\|\| NODE-BROKEN on (\S+)", logs)) == sorted(AGENTS), logs
    assert "slots requested exceeds default resource pool capacity" in logs
    assert "keep the trial off node-a, node-b" in logs
