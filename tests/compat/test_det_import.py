"""``stalwart import determined``, then the unmodified official client against the master.

A Determined 0.38.1 database (the captured schema, seeded as a Determined master writes it) is
imported into a master's SQLite database before the master starts. Then, with the official
``det`` CLI and SDK: an imported user logs in with the password they had on Determined (and
it is rehashed to Stalwart's own); the experiments are listed and described; each trial's
metrics and best checkpoint read back; a checkpoint downloads from its original storage; the
model's versions are listed; a trial's imported task logs read back; the experiments that were
running (a single trial, an adaptive ASHA search) are activated with ``det e activate`` and
resume their own trials.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.master.db.engine import make_engine
from stalwart.master.importer import import_determined
from tests.compat.conftest import (
    REPO,
    Det,
    MasterProcess,
    _start_master,
    _stop,
    det_at,
    sdk_result,
)
from tests.importer.conftest import Determined, new_determined
from tests.importer.seed import LiveSearches, add_live_searches

pytestmark = pytest.mark.compat

SDK_SCRIPT = REPO / "tests" / "compat" / "workflows" / "imported_sdk.py"
LIVE: dict[str, LiveSearches] = {}
"""The live searches added to each seeded database, by its url."""


@pytest.fixture(scope="module")
def imported(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MasterProcess, Determined]]:
    """A master started on a database the seeded Determined cluster was imported into."""
    databases = new_determined(tmp_path_factory.mktemp("det-checkpoints"))
    source = next(databases)
    seeded = source.seeded
    LIVE[source.url] = add_live_searches(
        source.url, seeded.storage_dir, seeded.project_id, seeded.user_ids["alice"]
    )
    workdir = tmp_path_factory.mktemp("master")
    home = workdir / "master-home"
    home.mkdir(mode=0o700)
    engine = make_engine(f"sqlite:///{home / 'master.db'}")
    try:
        report = import_determined(source.url, engine, task_logs=True)
    finally:
        engine.dispose()
    assert report.imported("experiment") == 5, report.render()
    master = _start_master(workdir)
    try:
        yield master, source
    finally:
        _stop(master.process)
        databases.close()


@pytest.fixture
def alice(det_venv: Path, imported: tuple[MasterProcess, Determined], tmp_path: Path) -> Det:
    """The official CLI logged in as the imported ``alice``, with her old password."""
    master, source = imported
    cli = det_at(det_venv, master, tmp_path / "alice")
    cli.login("alice", source.seeded.passwords["alice"])
    return cli


def test_an_imported_user_logs_in_with_the_old_password(
    det_venv: Path, imported: tuple[MasterProcess, Determined], tmp_path: Path
) -> None:
    master, source = imported
    cli = det_at(det_venv, master, tmp_path / "bob")
    wrong = cli.run("user", "login", "bob", stdin="not-the-password\n")
    assert wrong.returncode != 0
    cli.login("bob", source.seeded.passwords["bob"])
    assert "bob" in cli.ok("user", "whoami").stdout
    with sqlite3.connect(master.home / "master.db") as db:
        (stored,) = db.execute("SELECT password_hash FROM users WHERE username = 'bob'").fetchone()
    assert stored.startswith("$argon2id$")  # rehashed to Stalwart's own on that login
    cli.ok("user", "logout")
    cli.login("bob", source.seeded.passwords["bob"])  # and the password still works


def test_experiments_are_listed_and_described(
    alice: Det, imported: tuple[MasterProcess, Determined]
) -> None:
    seeded = imported[1].seeded
    listed = alice.ok("experiment", "list", "--all").stdout
    assert "mnist-asha" in listed
    assert "mnist-single" in listed
    described = json.loads(alice.ok("experiment", "describe", str(seeded.asha_id), "--json").stdout)
    experiment = described[0]["experiment"]
    assert experiment["state"] == "STATE_COMPLETED"
    assert experiment["labels"] == ["mnist", "asha"]
    assert experiment["notes"] == "# Sweep\nlr matters most."
    trials = alice.ok("experiment", "list-trials", str(seeded.asha_id)).stdout
    for trial in seeded.trials_of(seeded.asha_id):
        assert f" {trial.id} " in f" {trials} ".replace("|", " ")
    single = json.loads(alice.ok("experiment", "describe", str(seeded.single_id), "--json").stdout)[
        0
    ]["experiment"]
    assert single["state"] == "STATE_PAUSED"
    assert "paused" in single["notes"]


def test_metrics_and_best_checkpoints_read_back(
    det_venv: Path, alice: Det, imported: tuple[MasterProcess, Determined]
) -> None:
    seeded = imported[1].seeded
    result = sdk_result(
        det_venv, alice, SDK_SCRIPT, "alice", seeded.passwords["alice"], str(seeded.asha_id)
    )
    assert result["best"] == seeded.model_checkpoint
    for trial in seeded.trials_of(seeded.asha_id):
        got = result["trials"][str(trial.id)]
        assert got["best"] == trial.best_checkpoint
        metrics = got["metrics"]
        assert len(metrics["training"]) == trial.training_reports
        assert len(metrics["validation"]) == trial.validation_reports
        assert len(metrics["inference"]) == trial.custom_reports
        steps = [m[0] for m in metrics["validation"]]
        assert steps == sorted(steps)
        assert all("validation_loss" in m[1] for m in metrics["validation"])
    best = alice.ok("experiment", "list-checkpoints", "--best", "1", str(seeded.asha_id)).stdout
    assert seeded.model_checkpoint in best


def test_the_paused_experiment_activates_with_its_one_trial(
    det_venv: Path, imported: tuple[MasterProcess, Determined], tmp_path: Path
) -> None:
    """The experiment that was running on Determined: the master has been driving it since it
    started, and it still has its one trial; activated, it is ACTIVE with that trial."""
    master, source = imported
    seeded = source.seeded
    (trial,) = seeded.trials_of(seeded.single_id)
    bob = det_at(det_venv, master, tmp_path / "bob")
    bob.login("bob", seeded.passwords["bob"])
    bob.ok("experiment", "activate", str(seeded.single_id))
    described = json.loads(bob.ok("experiment", "describe", str(seeded.single_id), "--json").stdout)
    assert described[0]["experiment"]["state"] == "STATE_QUEUED"  # ACTIVE, waiting for an agent
    with sqlite3.connect(master.home / "master.db") as db:
        rows = db.execute(
            "SELECT id, latest_checkpoint FROM trials WHERE experiment_id = ?", (seeded.single_id,)
        ).fetchall()
    assert rows == [(trial.id, trial.checkpoints[-1])]  # no new trial; resumes from there


def test_the_live_asha_search_activates_with_its_own_trials(
    det_venv: Path, imported: tuple[MasterProcess, Determined], tmp_path: Path
) -> None:
    """The ASHA search that was running on Determined, replayed at import: activated with the
    official client, its two running trials are ACTIVE again with their latest checkpoints, the
    trials ASHA stopped stay COMPLETED, and no trial is added (the master has been driving it
    since it started)."""
    master, source = imported
    live = LIVE[source.url]
    cli = det_at(det_venv, master, tmp_path / "alice")
    cli.login("alice", source.seeded.passwords["alice"])
    described = json.loads(cli.ok("experiment", "describe", str(live.asha_id), "--json").stdout)
    assert described[0]["experiment"]["state"] == "STATE_PAUSED"
    cli.ok("experiment", "activate", str(live.asha_id))
    described = json.loads(cli.ok("experiment", "describe", str(live.asha_id), "--json").stdout)
    assert described[0]["experiment"]["state"] == "STATE_QUEUED"  # ACTIVE, waiting for an agent
    with sqlite3.connect(master.home / "master.db") as db:
        rows = {
            row[0]: row[1:]
            for row in db.execute(
                "SELECT id, state, latest_checkpoint FROM trials WHERE experiment_id = ?",
                (live.asha_id,),
            )
        }
    t = live.trials
    assert len(rows) == live.asha_max_trials
    for role in ("asha-running", "asha-young"):
        assert rows[t[role].id] == ("ACTIVE", t[role].checkpoints[-1])
    for role in ("asha-best", "asha-stopped-1", "asha-stopped-2"):
        assert rows[t[role].id][0] == "COMPLETED"
    assert rows[t["asha-errored"].id][0] == "ERROR"


def test_trial_logs_read_back(alice: Det, imported: tuple[MasterProcess, Determined]) -> None:
    seeded = imported[1].seeded
    trial = seeded.trials_of(seeded.asha_id)[0]
    logs = alice.ok("trial", "logs", str(trial.id)).stdout
    for line in trial.log_lines:
        assert line.strip() in logs


def test_a_checkpoint_downloads_from_its_original_storage(
    alice: Det, imported: tuple[MasterProcess, Determined], tmp_path: Path
) -> None:
    seeded = imported[1].seeded
    uuid = seeded.model_checkpoint
    out = tmp_path / "downloaded"
    alice.ok("checkpoint", "download", uuid, "--output-dir", str(out))
    original = seeded.storage_dir / uuid
    assert (out / "state_dict.pth").read_bytes() == (original / "state_dict.pth").read_bytes()
    assert (out / "code" / "train.py").exists()


def test_the_models_versions_are_listed(
    alice: Det, imported: tuple[MasterProcess, Determined]
) -> None:
    seeded = imported[1].seeded
    versions = alice.ok("model", "list-versions", "mnist-cnn").stdout
    assert seeded.model_checkpoint in versions
    described = alice.ok("model", "describe", "mnist-cnn", "--json").stdout
    assert json.loads(described)["name"] == "mnist-cnn"
