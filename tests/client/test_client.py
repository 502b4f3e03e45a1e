"""The SDK against a real master and agent: experiments, trials, checkpoints, users, errors."""

from __future__ import annotations

import io
import json
import stat
import tarfile
import time
from pathlib import Path

import pytest

from stalwart import errors
from stalwart.client import (
    TRIAL_TERMINAL_STATES,
    Client,
    Experiment,
    MasterUnreachableError,
    Trial,
    WaitTimeoutError,
)
from stalwart.local import LocalCluster
from tests.client.support import CONFIG


def _first_trial_running(exp: Experiment, timeout: float = 30) -> Trial:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        trials = exp.trials()
        reported = bool(trials) and next(trials[0].metrics("training"), None) is not None
        if reported and trials[0].state == "RUNNING":
            return trials[0]
        time.sleep(0.1)
    raise AssertionError(f"experiment {exp.id} started no trial in {timeout}s")


def test_a_finished_experiment_can_be_read_back(finished: Experiment, tmp_path: Path) -> None:
    assert finished.reload().state == "COMPLETED"
    assert finished.name == "tiny"
    assert finished.config["searcher"]["metric"] == "loss"
    (trial,) = finished.trials()
    assert trial.state == "COMPLETED"
    assert trial.hparams == {"steps": 4, "period": 2, "x": 0.5}
    assert [m.total_batches for m in trial.metrics("training")] == [1, 2, 3, 4]
    assert [m.total_batches for m in trial.metrics("validation")] == [2, 4]

    everything = [line.log for line in trial.logs()]
    assert "training done\n" in everything
    assert [line.log for line in trial.logs(head=2)] == everything[:2]
    assert [line.log for line in trial.logs(tail=2)] == everything[-2:]
    assert [line.log for line in trial.logs(follow=True)] == everything  # ends: trial is done

    best = finished.top_checkpoint()
    assert best is not None
    assert best.state == "COMPLETED"
    assert best.steps_completed == 4
    assert best.trial_id == trial.id
    assert [c.uuid for c in trial.checkpoints() if c.state == "COMPLETED"] == [best.uuid]
    seen: list[tuple[int, int]] = []
    path = best.download(tmp_path / "ckpt", progress=lambda done, total: seen.append((done, total)))
    assert json.loads((path / "state.json").read_text()) == {"step": 4}
    assert seen[-1][0] == seen[-1][1] > 0

    with tarfile.open(fileobj=io.BytesIO(finished.model_definition())) as archive:
        names = {name.removeprefix("./") for name in archive.getnames()}
    assert {"train.py", "const.yaml"} <= names
    assert not names & {"data", "data/big.bin", "model.ckpt", "notes.txt", ".stalwartignore"}
    saved = finished.download_model_def(tmp_path)
    assert saved.name == f"experiment_{finished.id}_model_def.tgz"


def test_lifecycle_of_a_paused_experiment(admin: Client, model_dir: Path) -> None:
    seen: list[tuple[int, int]] = []
    exp = admin.create_experiment(
        model_dir / "const.yaml",
        model_dir,
        activate=False,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen
    assert seen[-1][0] == seen[-1][1]
    assert exp.state == "PAUSED"
    with pytest.raises(WaitTimeoutError, match="still PAUSED"):
        exp.wait(timeout=0.2, interval=0.1)
    exp.kill()
    assert exp.wait(timeout=30, interval=0.1) == "CANCELED"
    exp.archive()
    assert exp.id not in [e.id for e in admin.list_experiments()]
    assert exp.id in [e.id for e in admin.list_experiments(archived=None, users=["admin"])]
    assert [e.id for e in admin.list_experiments(archived=True)] == [exp.id]
    exp.unarchive()
    assert exp.id in [e.id for e in admin.list_experiments(states=["CANCELED"])]
    assert admin.list_experiments(users=["nobody"]) == []
    exp.delete()
    with pytest.raises(errors.NotFoundError, match=f"experiment {exp.id} not found"):
        exp.reload()


def test_killing_a_running_trial_ends_its_log_stream(admin: Client, model_dir: Path) -> None:
    config = CONFIG.replace("steps: 4", "steps: 400\n  sleep: 0.05")
    exp = admin.create_experiment(config, model_dir)
    trial = _first_trial_running(exp)
    trial.kill()
    lines = list(trial.logs(follow=True))  # returns once the trial is terminal
    assert lines
    assert trial.reload().state in TRIAL_TERMINAL_STATES
    exp.kill()
    assert exp.wait(timeout=30, interval=0.1) in ("CANCELED", "COMPLETED")
    assert admin.get_trial(trial.id).experiment_id == exp.id


def test_master_errors_come_back_as_the_same_classes(
    admin: Client, cluster: LocalCluster, tmp_path: Path, model_dir: Path
) -> None:
    with pytest.raises(errors.NotFoundError, match="experiment 987654 not found") as info:
        admin.get_experiment(987654)
    assert info.value.hint is not None
    with pytest.raises(errors.NotFoundError, match="trial 987654 not found"):
        admin.get_trial(987654)
    with pytest.raises(errors.NotFoundError):
        admin.get_checkpoint("00000000-0000-0000-0000-000000000000")
    paused = admin.create_experiment(CONFIG, model_dir, activate=False)
    with pytest.raises(errors.FailedPreconditionError, match="must be COMPLETED"):
        paused.delete()
    paused.kill()

    wrong = Client(cluster.url, "admin", "wrong", config_dir=tmp_path, environ={})
    with wrong, pytest.raises(errors.UnauthenticatedError, match="wrong username or password"):
        wrong.whoami()
    nowhere = Client("http://127.0.0.1:9", config_dir=tmp_path, environ={})
    with nowhere, pytest.raises(MasterUnreachableError, match="cannot reach the master"):
        nowhere.whoami()


def test_an_invalid_config_names_its_file_and_line(admin: Client, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("metric: loss", "metric: 3\n  max_trialz: 2"))
    with pytest.raises(errors.ConfigError) as info:
        admin.create_experiment(bad, None)
    assert info.value.source == str(bad)
    assert any("searcher.metric (line 9)" in p for p in info.value.problems)
    assert any("max_trialz (line 10)" in p for p in info.value.problems)
    with pytest.raises(errors.ConfigError, match="YAML syntax error at line 2"):
        admin.create_experiment("a: [1\n", None)
    with pytest.raises(errors.ConfigError, match="must be a mapping"):
        admin.create_experiment("- 1\n", None)


def test_tokens_are_cached_per_master_and_user(cluster: LocalCluster, tmp_path: Path) -> None:
    config_dir = tmp_path / "stalwart"
    with Client(cluster.url, "admin", "", config_dir=config_dir, environ={}) as first:
        first.login("admin", "")
        assert first.whoami().username == "admin"
    store = config_dir / "auth.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    token = json.loads(store.read_text())["masters"][cluster.url]["tokens"]["admin"]
    env = {"STALWART_MASTER": cluster.url, "XDG_CONFIG_HOME": str(tmp_path)}
    with Client(environ=env) as again:  # the active user, its cached token
        assert again.user == "admin"
        assert again.whoami().admin
    assert json.loads(store.read_text())["masters"][cluster.url]["tokens"]["admin"] == token

    data = json.loads(store.read_text())
    data["masters"][cluster.url]["tokens"]["admin"] = "stale"
    store.write_text(json.dumps(data))
    with Client(environ=env) as stale:  # a 401 drops the token and logs in again
        assert stale.whoami().username == "admin"
    assert json.loads(store.read_text())["masters"][cluster.url]["tokens"]["admin"] != "stale"

    with Client(environ=env) as leaving:
        leaving.logout()
    assert json.loads(store.read_text())["masters"][cluster.url]["active_user"] is None
    with Client(environ=env) as nobody:  # Determined's default user, empty password
        assert nobody.user == "determined"
        assert nobody.whoami().username == "determined"


def test_users(admin: Client, cluster: LocalCluster, tmp_path: Path) -> None:
    created = admin.create_user("sdk-bob", password="s3cret-pw", display_name="Bob")
    assert (created.username, created.admin, created.active) == ("sdk-bob", False, True)
    assert "sdk-bob" in [u.username for u in admin.list_users()]
    with pytest.raises(errors.AlreadyExistsError):
        admin.create_user("sdk-bob")
    with Client(cluster.url, "sdk-bob", "s3cret-pw", config_dir=tmp_path, environ={}) as bob:
        assert bob.whoami().display_name == "Bob"
        with pytest.raises(errors.ForbiddenError):
            bob.create_user("sdk-eve")
        bob.change_password("n3w-password")
        bob.login("sdk-bob", "n3w-password")
    admin.change_password("other-password", "sdk-bob")
    old = Client(cluster.url, "sdk-bob", "n3w-password", config_dir=tmp_path, environ={})
    with old, pytest.raises(errors.UnauthenticatedError):
        old.whoami()
    assert not admin.deactivate_user("sdk-bob").active
    inactive = Client(cluster.url, "sdk-bob", "other-password", config_dir=tmp_path, environ={})
    with inactive, pytest.raises(errors.ForbiddenError, match="user is not active"):
        inactive.whoami()
    assert admin.activate_user("sdk-bob").active
    with Client(cluster.url, "sdk-bob", "other-password", config_dir=tmp_path, environ={}) as back:
        assert back.whoami().username == "sdk-bob"


def test_cluster_views(admin: Client) -> None:
    (agent,) = admin.list_agents()
    assert agent.id == "a1"
    assert len(agent.slots or {}) == 2
    assert isinstance(admin.list_tasks(), dict)
    info = admin.master_info()
    assert info.version == "0.38.1"
    assert info.stalwart_version
    assert admin.master_config()["checkpoint_storage"]["type"] == "shared_fs"
