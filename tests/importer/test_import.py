"""``stalwart import determined`` into SQLite and PostgreSQL master databases: everything the
seeded Determined cluster holds comes over as it was, a second run changes nothing, a dry run
writes nothing, ids taken here are renumbered and reported, and the Determined database is
never written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import psycopg
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from stalwart.master.db.tables import (
    Base,
    Checkpoint,
    Experiment,
    ImportMapping,
    MetricReport,
    Model,
    ModelVersion,
    Project,
    StorageBackend,
    TaskLog,
    Template,
    Trial,
    TrialMetricSummary,
    User,
    Webhook,
    WebhookTrigger,
    Workspace,
)
from stalwart.master.importer import Skipped, import_determined
from stalwart.master.importer.source import DeterminedSource
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.passwords import client_hash, verify_password
from tests.importer.conftest import Determined, new_determined
from tests.importer.seed import add_trial


def _counts(report: Any) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = report.as_json()["counts"]
    return counts


def test_everything_comes_over_as_it_was(determined: Determined, target: Engine) -> None:
    seeded = determined.seeded
    report = import_determined(determined.url, target)
    counts = _counts(report)
    assert counts["user"] == {"imported": 2, "matched": 2}  # admin and determined exist here
    assert counts["workspace"] == {"imported": 1, "matched": 1}  # Uncategorized
    assert counts["project"] == {"imported": 1, "matched": 1}
    for kind, n in [
        ("experiment", 3),
        ("trial", 6),
        ("checkpoint", 13),
        ("model", 1),
        ("model_version", 1),
        ("template", 1),
        ("webhook", 1),
    ]:
        assert counts[kind] == {"imported": n}, kind
    reports = sum(
        t.training_reports + t.validation_reports + t.custom_reports for t in seeded.trials.values()
    )
    assert counts["metrics"] == {"imported": reports}
    assert report.renumbered == []  # every id was free
    assert report.skipped == []
    assert any("preemption_timeout" in note for note in report.notes)

    with Session(target) as session:
        alice = session.scalars(select(User).where(User.username == "alice")).one()
        assert alice.id == seeded.user_ids["alice"]
        assert alice.password_hash is not None
        assert alice.password_hash.startswith("$2a$15$")
        assert verify_password(client_hash(seeded.passwords["alice"]), alice.password_hash)
        assert not verify_password(client_hash("wrong"), alice.password_hash)
        bob = session.scalars(select(User).where(User.username == "bob")).one()
        assert bob.admin

        workspace = session.get(Workspace, seeded.workspace_id)
        assert workspace is not None
        assert workspace.name == "vision"
        project = session.get(Project, seeded.project_id)
        assert project is not None
        assert (project.name, project.key, project.workspace_id) == ("mnist", "MNIST", 2)
        assert project.notes == [{"name": "Plan", "contents": "try ASHA first"}]

        asha = session.get(Experiment, seeded.asha_id)
        assert asha is not None
        assert (asha.state, asha.name, asha.searcher_type) == (
            "COMPLETED",
            "mnist-asha",
            "adaptive_asha",
        )
        assert asha.labels == ["mnist", "asha"]
        assert asha.description == "digits sweep"
        assert asha.notes == "# Sweep\nlr matters most."
        assert asha.owner_id == alice.id
        assert asha.project_id == seeded.project_id
        assert "preemption_timeout" not in asha.config
        assert asha.config["checkpoint_storage"]["host_path"] == str(seeded.storage_dir)
        assert asha.original_config.startswith("name: mnist-asha")
        assert asha.model_definition
        assert asha.model_definition[:2] == b"\x1f\x8b"
        assert asha.checkpoints_collected  # GC leaves Determined's checkpoints alone

        single = session.get(Experiment, seeded.single_id)
        assert single is not None
        assert single.state == "PAUSED"
        assert "Imported from Determined while ACTIVE: paused" in single.notes
        assert single.searcher_state is not None
        (single_trial,) = session.scalars(
            select(Trial).where(Trial.experiment_id == single.id)
        ).all()
        assert single_trial.state == "PAUSED"
        assert single_trial.restarts == 1
        archived = session.get(Experiment, seeded.archived_id)
        assert archived is not None
        assert archived.archived
        assert archived.project_id == 1

        for seeded_trial in seeded.trials.values():
            trial = session.get(Trial, seeded_trial.id)
            assert trial is not None
            assert trial.experiment_id == seeded_trial.experiment_id
            assert trial.hparams == seeded_trial.hparams
            assert trial.task_id == f"{trial.experiment_id}.{trial.request_id}"
            groups = dict(
                session.execute(
                    select(MetricReport.group, func.count())
                    .where(MetricReport.trial_id == trial.id)
                    .group_by(MetricReport.group)
                ).all()
            )
            expected = {
                "training": seeded_trial.training_reports,
                "validation": seeded_trial.validation_reports,
                "inference": seeded_trial.custom_reports,
            }
            assert groups == {k: v for k, v in expected.items() if v}
            uuids = set(
                session.scalars(select(Checkpoint.uuid).where(Checkpoint.trial_id == trial.id))
            )
            assert uuids == set(seeded_trial.checkpoints)
            assert trial.latest_checkpoint == (
                seeded_trial.checkpoints[-1] if seeded_trial.checkpoints else None
            )

        validation = session.scalars(
            select(MetricReport).where(
                MetricReport.trial_id == next(iter(seeded.trials)),
                MetricReport.group == "validation",
            )
        ).first()
        assert validation is not None
        assert set(validation.metrics) == {"validation_loss", "accuracy"}
        # what the experiment list sorts by: the best trial, and each trial's summaries
        asha_trials = [t for t in seeded.trials_of(seeded.asha_id) if t.best_value is not None]
        best = min(asha_trials, key=lambda t: (t.best_value, t.id))
        asha_best = session.get(Experiment, seeded.asha_id)
        assert asha_best is not None
        assert (asha_best.best_trial_id, asha_best.best_searcher_metric) == (
            best.id,
            best.best_value,
        )
        summary = session.get(TrialMetricSummary, (best.id, "validation", "validation_loss"))
        assert summary is not None
        assert (summary.min, summary.count) == (best.best_value, best.validation_reports)
        training = session.scalars(
            select(MetricReport).where(MetricReport.group == "training")
        ).first()
        assert training is not None
        assert training.batch_metrics == [training.metrics]

        checkpoint = session.get(Checkpoint, seeded.model_checkpoint)
        assert checkpoint is not None
        assert checkpoint.state == "COMPLETED"
        assert checkpoint.metadata_["determined_version"] == "0.38.1"
        assert checkpoint.steps_completed == checkpoint.metadata_["steps_completed"]
        assert checkpoint.resources["state_dict.pth"] > 0
        storage = session.get(StorageBackend, checkpoint.storage_id)
        assert storage is not None
        assert storage.config["type"] == "shared_fs"
        assert storage.config["host_path"] == str(seeded.storage_dir)

        model = session.scalars(select(Model)).one()
        assert (model.name, model.labels, model.metadata_) == (
            "mnist-cnn",
            ["prod"],
            {"team": "vision"},
        )
        version = session.scalars(select(ModelVersion)).one()
        assert (version.version, version.checkpoint_uuid) == (1, seeded.model_checkpoint)
        assert model.last_version == 1
        template = session.get(Template, "gpu-defaults")
        assert template is not None
        assert template.workspace_id == seeded.workspace_id
        hook = session.scalars(select(Webhook)).one()
        assert (hook.url, hook.mode, hook.workspace_id) == (
            "https://hooks.example.org/det",
            "WORKSPACE",
            seeded.workspace_id,
        )
        trigger = session.scalars(select(WebhookTrigger)).one()
        assert (trigger.trigger_type, trigger.condition) == (
            "EXPERIMENT_STATE_CHANGE",
            {"state": "COMPLETED"},
        )


def _snapshot(engine: Engine) -> dict[str, list[str]]:
    """Every row of every table (import times aside), as sorted text."""
    rows: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            columns = [c for c in table.columns if c.name != "imported_at"]
            found = conn.execute(select(*columns)).all()
            rows[table.name] = sorted(json.dumps(list(r), default=str) for r in found)
    return rows


def test_a_second_import_changes_nothing(determined: Determined, target: Engine) -> None:
    import_determined(determined.url, target)
    before = _snapshot(target)
    again = import_determined(determined.url, target)
    assert _snapshot(target) == before
    assert all("imported" not in c for c in _counts(again).values()), _counts(again)
    assert _counts(again)["experiment"] == {"present": 3}
    assert _counts(again)["metrics"]["present"] > 0


def test_a_dry_run_writes_nothing(determined: Determined, target: Engine) -> None:
    dry = import_determined(determined.url, target, dry_run=True)
    assert dry.dry_run
    with Session(target) as session:
        assert session.scalar(select(func.count()).select_from(Experiment)) == 0
        assert session.scalar(select(func.count()).select_from(ImportMapping)) == 0
        # Only what a master's start writes (the migrations, the built-in users) is there.
        assert set(session.scalars(select(User.username))) == {"admin", "determined"}
    real = import_determined(determined.url, target)
    assert _counts(dry) == _counts(real)


def test_ids_taken_here_are_renumbered_and_reported(determined: Determined, target: Engine) -> None:
    from stalwart.master.db import migrate

    migrate.upgrade(target)
    with Session(target) as session:
        bootstrap(session, "")
        session.add(User(username="carol", active=True))  # takes id 3, alice's
        session.commit()
    report = import_determined(determined.url, target)
    moved = {(kind, old): new for kind, old, new in report.renumbered}
    old_alice = determined.seeded.user_ids["alice"]
    assert ("user", str(old_alice)) in moved
    assert "user 3 -> " in report.render()
    with Session(target) as session:
        alice = session.scalars(select(User).where(User.username == "alice")).one()
        assert str(alice.id) == moved[("user", str(old_alice))]
        asha = session.get(Experiment, determined.seeded.asha_id)
        assert asha is not None
        assert asha.owner_id == alice.id
        carol = session.scalars(select(User).where(User.username == "carol")).one()
        assert carol.id == 3


def test_one_workspace_only(determined: Determined, target: Engine) -> None:
    report = import_determined(determined.url, target, workspace="vision")
    counts = _counts(report)
    assert counts["experiment"] == {"imported": 2}  # not the archived one in Uncategorized
    assert counts["user"] == {"imported": 2, "matched": 2}
    assert counts["model"] == {"imported": 1}
    with Session(target) as session:
        names = set(session.scalars(select(Experiment.name)))
    assert names == {"mnist-asha", "mnist-single"}


def test_the_determined_database_is_never_written(determined: Determined) -> None:
    with DeterminedSource(determined.url) as source:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            source.conn.execute("UPDATE users SET display_name = 'x'")
        source.conn.rollback()
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            source.conn.execute("CREATE TABLE intruder (id int)")


def test_task_logs_come_over_only_when_asked(determined: Determined, target: Engine) -> None:
    seeded = determined.seeded
    without = import_determined(determined.url, target)
    assert without.left_out["task_logs"][1] == "task logs are imported only with --task-logs"
    with Session(target) as session:
        assert session.scalar(select(func.count()).select_from(TaskLog)) == 0
    with_logs = import_determined(determined.url, target, task_logs=True)
    lines = sum(len(t.log_lines) for t in seeded.trials.values())
    assert _counts(with_logs)["task_log"] == {"imported": lines}
    assert "task_logs" not in with_logs.left_out
    with Session(target) as session:
        for seeded_trial in seeded.trials.values():
            trial = session.get(Trial, seeded_trial.id)
            assert trial is not None
            logs = session.scalars(
                select(TaskLog.log).where(TaskLog.task_id == trial.task_id).order_by(TaskLog.id)
            ).all()
            assert list(logs) == seeded_trial.log_lines
    again = import_determined(determined.url, target, task_logs=True)
    assert _counts(again)["task_log"] == {"present": lines}


def test_a_live_search_that_cannot_be_replayed_comes_over_canceled_and_its_later_trials_follow(
    tmp_path: Path, target: Engine
) -> None:
    """An ASHA search marked running on Determined whose trials have all ended (Stalwart's
    searcher, replayed, has nothing left to run) is imported CANCELED with the reason in a note
    and in the report; trials Determined creates afterwards come over with their metrics and
    checkpoints on the next run. (Searches that can be replayed: ``test_live_searches``.)"""
    for determined in new_determined(tmp_path / "det-checkpoints"):
        seeded = determined.seeded
        with psycopg.connect(determined.url) as conn:
            conn.execute(
                "UPDATE experiments SET state = 'ACTIVE', end_time = NULL WHERE id = %s",
                (seeded.asha_id,),
            )
        first = import_determined(determined.url, target)
        assert Skipped("searcher_state", str(seeded.asha_id), ANY) in first.skipped
        with Session(target) as session:
            asha = session.get(Experiment, seeded.asha_id)
            assert asha is not None
            assert asha.state == "CANCELED"
            assert asha.end_time is not None
            assert "searcher, replayed, has nothing left to run" in asha.notes
            assert asha.notes.startswith("# Sweep")  # Determined's notes first

        later = add_trial(determined.url, seeded.storage_dir, seeded.asha_id, seeded.project_id)
        second = import_determined(determined.url, target)
        counts = _counts(second)
        assert counts["trial"] == {"imported": 1}
        assert counts["checkpoint"]["imported"] == len(later.checkpoints)
        assert counts["metrics"]["imported"] == later.training_reports + later.validation_reports
        with Session(target) as session:
            trial = session.get(Trial, later.id)
            assert trial is not None
            assert (trial.experiment_id, trial.state) == (seeded.asha_id, "COMPLETED")
            reports = session.scalar(select(func.count()).where(MetricReport.trial_id == later.id))
            assert reports == later.training_reports + later.validation_reports
        assert _counts(import_determined(determined.url, target))["trial"] == {}
