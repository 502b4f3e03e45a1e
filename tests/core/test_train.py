"""TrainContext against a real master: metrics land in order, survive a master restart; progress,
best validation, early exit; the local twin."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stalwart.core import EarlyExitReason, LocalTrainContext, TaskEnv
from stalwart.core._context import build_context
from stalwart.errors import InvalidArgumentError
from stalwart.master.db.tables import Trial
from tests.core.conftest import FAST_RETRY, MasterServer, new_trial, read_metrics
from tests.master.conftest import make_settings


def test_metrics_land_in_order_after_close(master: MasterServer, trial_env: TaskEnv) -> None:
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        for step in range(1, 51):
            ctx.train.report_training_metrics(
                step, {"loss": 1.0 / step}, batch_metrics=[{"loss": 1.0 / step}]
            )
            if step % 10 == 0:
                ctx.train.report_validation_metrics(step, {"loss": 2.0 / step, "acc": math.nan})
        ctx.train.report_metrics("custom", 50, {"lr": 0.1, "note": "ok"})

    training = read_metrics(master, trial_env, "training")
    assert [r["totalBatches"] for r in training] == list(range(1, 51))
    assert [r["id"] for r in training] == sorted(r["id"] for r in training)
    assert training[0]["metrics"]["avg_metrics"] == {"loss": 1.0}
    assert training[0]["metrics"]["batch_metrics"] == [{"loss": 1.0}]
    validation = read_metrics(master, trial_env, "validation")
    assert [r["totalBatches"] for r in validation] == [10, 20, 30, 40, 50]
    assert validation[-1]["metrics"]["validation_metrics"] == {"loss": 0.04, "acc": "NaN"}
    custom = read_metrics(master, trial_env, "custom")
    assert custom[0]["metrics"]["avg_metrics"] == {"lr": 0.1, "note": "ok"}


def test_a_report_survives_a_master_restart(tmp_path: Path) -> None:
    server = MasterServer(make_settings(tmp_path / "home")).start()
    try:
        env = new_trial(server)
        ctx = build_context(env, retry=FAST_RETRY)
        with ctx:
            ctx.train.report_training_metrics(1, {"loss": 1.0})
            server.stop()
            ctx.train.report_training_metrics(2, {"loss": 0.5})
            server.start()  # same port, same database
        assert [r["totalBatches"] for r in read_metrics(server, env, "training")] == [1, 2]
    finally:
        server.stop()


def test_validation_metrics_refuse_none_and_drop_bytes(
    master: MasterServer, trial_env: TaskEnv
) -> None:
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        with pytest.raises(RuntimeError, match="'loss' returned an invalid scalar value: None"):
            ctx.train.report_validation_metrics(1, {"loss": None})
        ctx.train.report_validation_metrics(2, {"loss": 0.5, "blob": b"\x00"})
        with pytest.raises(TypeError, match=r"metrics\['x'\] is a object"):
            ctx.train.report_training_metrics(3, {"x": object()})
        with pytest.raises(ValueError, match="steps_completed must be >= 0"):
            ctx.train.report_training_metrics(-1, {"loss": 1.0})
    validation = read_metrics(master, trial_env, "validation")
    assert [r["metrics"]["validation_metrics"] for r in validation] == [{"loss": 0.5}]


def test_reports_are_snapshots(master: MasterServer, trial_env: TaskEnv) -> None:
    metrics = {"loss": 1.0}
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        ctx.train.report_training_metrics(1, metrics)
        metrics["loss"] = 99.0
    assert read_metrics(master, trial_env, "training")[0]["metrics"]["avg_metrics"] == {"loss": 1.0}


def test_a_refused_report_is_raised_at_close(master: MasterServer, trial_env: TaskEnv) -> None:
    assert trial_env.trial is not None
    with master.state.sessions() as session:  # a newer run makes this one stale
        trial = session.get(Trial, trial_env.trial.trial_id)
        assert trial is not None
        trial.run_id += 1
        session.commit()
    ctx = build_context(trial_env, retry=FAST_RETRY)
    ctx.start()
    ctx.train.report_training_metrics(1, {"loss": 1.0})
    with pytest.raises(InvalidArgumentError, match="invalid run id"):
        ctx.close()


def test_progress_best_validation_and_early_exit(master: MasterServer, trial_env: TaskEnv) -> None:
    assert trial_env.trial is not None
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        assert ctx.train.get_experiment_best_validation() is None
        ctx.train.report_validation_metrics(10, {"loss": 0.25})
        ctx.train.report_progress(0.5)
        with pytest.raises(ValueError, match="between 0 and 1"):
            ctx.train.report_progress(1.5)
        ctx.train.set_status("validating")
        assert ctx.train.set_metadata({"a": {"b": 1}}) == {"a": {"b": 1}}
        assert ctx.train.get_metadata() == {"a": {"b": 1}}
        ctx.train.report_early_exit(EarlyExitReason.INVALID_HP)
        ctx.train.report_early_exit(EarlyExitReason.INVALID_HP)  # a second one is ignored
    with master.state.sessions() as session:
        trial = session.get(Trial, trial_env.trial.trial_id)
        assert trial is not None
        assert trial.progress == 0.5
        assert trial.runner_state == "validating"
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        assert ctx.train.get_experiment_best_validation() == 0.25


def test_local_train_context_prints_and_keeps(capsys: pytest.CaptureFixture[str]) -> None:
    train = LocalTrainContext()
    train.report_training_metrics(5, {"loss": math.inf})
    train.report_metrics("validation", 5, {"loss": 0.5})
    train.report_progress(0.25)
    assert [(r.group, r.steps_completed, r.metrics) for r in train.reports] == [
        ("training", 5, {"loss": "Infinity"}),
        ("validation", 5, {"loss": 0.5}),
    ]
    out = capsys.readouterr().out
    assert '[training] steps_completed=5 {"loss": "Infinity"}' in out
    assert train.progress == 0.25
    assert train.get_experiment_best_validation() is None
