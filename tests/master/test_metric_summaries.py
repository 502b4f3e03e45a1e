"""Stored validation summaries and the experiment's stored best, kept by the ingest door:
reports add to them, a restarted run's rollback rebuilds them, non-finite values never count."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.app import open_state
from stalwart.master.db.tables import Experiment, Trial, TrialMetricSummary, User
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.services.tasks import create_trial, start_allocation
from stalwart.master.settings import MasterSettings


def _summary(session: Session, trial_id: int, name: str) -> tuple[float, ...] | None:
    row = session.get(TrialMetricSummary, (trial_id, "validation", name))
    if row is None:
        return None
    session.refresh(row)
    return (row.min, row.max, row.sum / row.count, float(row.count), row.last)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_reports_and_rollbacks_keep_summaries_and_the_best(
    tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    db = request.getfixturevalue("pg_url") if database == "postgresql" else None
    settings = MasterSettings(home=tmp_path / "home", db=db)
    state = open_state(settings)
    try:
        with state.sessions() as session:
            admin = session.scalars(select(User).where(User.username == "admin")).one()
            exp = create_experiment(
                session,
                settings,
                admin,
                config_text="entrypoint: python3 t.py\nsearcher: {name: single, metric: loss}\n",
                model_definition=[],
                activate=False,
            ).experiment
            first = create_trial(session, exp, hparams={}, seed=1)
            other = create_trial(session, exp, hparams={}, seed=2)
            start_allocation(session, first.task_id, slots=1)
            start_allocation(session, other.task_id, slots=1)
            session.commit()

            def report(trial: Trial, steps: int, **metrics: object) -> None:
                report_metrics_many(
                    session, [MetricsInput(trial.id, trial.run_id, "validation", steps, metrics)]
                )

            report(first, 10, loss=0.5, acc=True, note="x")
            report(first, 20, loss=0.2, nan="NaN")
            report(first, 30, loss=0.1)
            report(other, 10, loss=0.3)
            assert _summary(session, first.id, "loss") == pytest.approx(
                (0.1, 0.5, 0.8 / 3, 3.0, 0.1)
            )
            for name in ("acc", "note", "nan"):  # booleans, text, non-finite: not numbers
                assert _summary(session, first.id, name) is None
            session.refresh(exp)
            assert (exp.best_trial_id, exp.best_searcher_metric) == (first.id, 0.1)

            # a restarted run reporting step 20 archives run 1's reports at 20 and beyond
            start_allocation(session, first.task_id, slots=1)
            session.commit()
            session.refresh(first)
            assert first.run_id == 2
            report(first, 20, loss=0.4)
            assert _summary(session, first.id, "loss") == pytest.approx((0.4, 0.5, 0.45, 2.0, 0.4))
            session.refresh(exp)
            assert (exp.best_trial_id, exp.best_searcher_metric) == (other.id, 0.3)
            # an earlier step reported later does not become the latest value
            report(first, 15, loss=0.45)
            assert _summary(session, first.id, "loss") == pytest.approx(
                (0.4, 0.5, 1.35 / 3, 3.0, 0.4)
            )
            found = session.scalar(select(Experiment.best_trial_id).where(Experiment.id == exp.id))
            assert found == other.id
    finally:
        state.engine.dispose()
