"""What the ingest keeps for reading (:mod:`stalwart.master.services.series_store`): each
trial's stored ``summaryMetrics``, series counts and rollups always equal what its live
reports give, through batches, rollbacks, trials not built yet and their building."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import MetricReport, MetricRollup, MetricSeries, Trial
from stalwart.master.services import series_store
from stalwart.master.services.metrics import MetricsInput, metric_series, report_metrics_many
from stalwart.master.services.summary_metrics import summarize
from stalwart.master.services.tasks import start_allocation
from stalwart.master.state import MasterState
from stalwart.master.ui.series import SeriesCache
from tests.master.running_trials import running_trials

FANOUT = series_store.FANOUT


@pytest.fixture
def state(db_state: MasterState) -> MasterState:
    return db_state


def _trials(state: MasterState, count: int) -> list[int]:
    return running_trials(state, count)[1]


def _value(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.05:
        return "NaN"
    if roll < 0.08:
        return True
    if roll < 0.1:
        return {"nested": 1.0}
    if roll < 0.12:
        return "text"
    return rng.choice([rng.gauss(0, 1), rng.randint(-5, 5)])


def _report(state: MasterState, batch: list[MetricsInput]) -> None:
    with state.sessions() as session:
        report_metrics_many(session, batch)


def _live(session: Session, trial_id: int) -> list[tuple[int, str, int, dict[str, Any]]]:
    m = MetricReport
    return [
        (int(i), g, int(s), metrics)
        for i, g, s, metrics in session.execute(
            select(m.id, m.group, m.steps_completed, m.metrics)
            .where(m.trial_id == trial_id, m.archived.is_(False))
            .order_by(m.id)
        )
    ]


def _expected_rollups(
    reports: list[tuple[int, str, int, dict[str, Any]]], trial_id: int
) -> tuple[dict[tuple[str, str], tuple[int, int]], list[tuple[Any, ...]]]:
    """Series counts and rollup rows computed the slow way from the live reports."""
    values: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    for report_id, group, steps, metrics in reports:
        for name, raw in metrics.items():
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                continue
            if math.isfinite(raw):
                values.setdefault((group, name), []).append((float(raw), steps, report_id))
    counts = {key: (len(found), found[-1][2]) for key, found in values.items()}
    rows = []
    for (group, name), found in sorted(values.items()):
        for level in range(1, series_store.LEVELS + 1):
            size = FANOUT**level
            for bucket, start in enumerate(range(0, len(found), size)):
                part = found[start : start + size]
                low = min(part, key=lambda p: p[0])
                high = max(part, key=lambda p: p[0])
                total = round(sum(p[0] for p in part), 6)
                head = (trial_id, group, name, level, bucket, len(part), total)
                rows.append((*head, part[0], low, high, part[-1]))
    return counts, rows


def _stored_rollups(session: Session, trial_id: int) -> list[tuple[Any, ...]]:
    r = MetricRollup
    return [
        (
            row.trial_id,
            row.group,
            row.name,
            row.level,
            row.bucket,
            row.count,
            round(row.sum, 6),
            *(_point(row, p) for p in ("first", "min", "max", "last")),
        )
        for row in session.scalars(
            select(r).where(r.trial_id == trial_id).order_by(r.group, r.name, r.level, r.bucket)
        )
    ]


def _point(row: MetricRollup, name: str) -> tuple[float, int, int]:
    return (
        getattr(row, f"{name}_value"),
        getattr(row, f"{name}_steps"),
        getattr(row, f"{name}_report"),
    )


def _check(state: MasterState, trial_id: int) -> None:
    """The trial's stored data equals what its live reports give."""
    with state.sessions() as session:
        live = _live(session, trial_id)
        stored = session.scalar(select(Trial.summary_metrics).where(Trial.id == trial_id))
        assert stored == summarize([(g, m) for _, g, _, m in live])
        counts, rollups = _expected_rollups(live, trial_id)
        series = {
            (s.group, s.name): (s.points, s.newest_report)
            for s in session.scalars(select(MetricSeries).where(MetricSeries.trial_id == trial_id))
        }
        assert series == counts
        assert _stored_rollups(session, trial_id) == rollups


def test_batches_and_rollbacks_keep_the_stored_data_equal_to_the_reports(
    state: MasterState,
) -> None:
    first, other = _trials(state, 2)
    rng = random.Random(3)
    step = 0
    for size in (1, 7, 70, 3, 200, 64):  # batches that end mid-bucket, across both trials
        batch = []
        for _ in range(size):
            step += 1
            group = rng.choice(["training", "training", "validation", "custom"])
            metrics = {"loss": _value(rng), "acc": _value(rng)}
            batch.append(MetricsInput(rng.choice([first, other]), 1, group, step, metrics))
        _report(state, batch)
    _check(state, first)
    _check(state, other)

    # a restarted run reporting step 100 archives run 1's reports at 100 and beyond
    with state.sessions() as session:
        trial = session.get(Trial, first)
        assert trial is not None
        start_allocation(session, trial.task_id, slots=1)
        session.commit()
    _report(state, [MetricsInput(first, 2, "training", 100, {"loss": 9.5})])
    _report(state, [MetricsInput(first, 2, "training", 101 + i, {"loss": i}) for i in range(20)])
    with state.sessions() as session:
        assert session.scalar(
            select(MetricReport.id).where(MetricReport.trial_id == first, MetricReport.archived)
        )
    _check(state, first)
    _check(state, other)


def test_a_trial_not_built_reads_from_its_reports_until_it_is_built(state: MasterState) -> None:
    (trial,) = _trials(state, 1)
    reports = [
        MetricsInput(trial, 1, "training", s, {"loss": math.sin(s / 40) + s / 1000})
        for s in range(1, 2_001)
    ]
    _report(state, reports)
    with state.sessions() as session:
        built_summary = series_store.stored_summaries(session, [trial])
        built_chart = SeriesCache().experiment(session, [trial], "training", "loss", 200)
        built_series = metric_series(
            session, trial, group="training", metric="loss", max_points=200
        )
        assert built_chart[trial].total == 2_000
        assert len(built_chart[trial].batches) == 200
        assert built_series[0] == 2_000
        assert [p.batches for p in built_series[1]] == built_chart[trial].batches
        series_store.forget(session, [trial])  # as the importer leaves the trials it fills
        session.commit()
        assert (
            session.scalar(select(MetricSeries.points).where(MetricSeries.trial_id == trial))
            is None
        )
        assert series_store.stored_summaries(session, [trial]) == built_summary
        assert series_store.series_versions(session, [trial], "training", "loss") == {}
        raw = SeriesCache().experiment(session, [trial], "training", "loss", 200)
        assert raw[trial].total == 2_000  # read whole from the reports: exact LTTB
        assert raw[trial].batches[0] == 1
        assert raw[trial].batches[-1] == 2_000
        assert series_store.build_pending(session) == 1
        assert series_store.build_pending(session) == 0
    _check(state, trial)
    with state.sessions() as session:
        again = SeriesCache().experiment(session, [trial], "training", "loss", 200)
        assert again[trial] == built_chart[trial]


def test_a_long_series_reads_its_rollups_at_the_level_that_fits() -> None:
    assert series_store.level_for(1_600, 200) is None  # at most 8 values a point: read whole
    assert series_store.level_for(1_601, 200) == 1  # 201 buckets of 8
    assert series_store.level_for(10_000, 200) == 2  # 157 buckets of 64
    assert series_store.level_for(10_000, 1_000) == 1  # 1,250 buckets of 8
    assert series_store.level_for(10**12, 200) == series_store.LEVELS


def test_the_cluster_loop_builds_trials_left_unbuilt(state: MasterState) -> None:
    """A database from before stored series (or an import) has trials without them: the
    cluster loop builds them, a few each round, without any report arriving."""
    trials = _trials(state, series_store.BUILD_BATCH + 3)
    _report(state, [MetricsInput(t, 1, "training", 5, {"loss": t / 10}) for t in trials])
    with state.sessions() as session:
        series_store.forget(session, trials)
        session.commit()
    loop = ClusterLoop(state)

    def unbuilt() -> set[int]:
        with state.sessions() as session:
            return set(session.scalars(select(Trial.id).where(Trial.summary_metrics.is_(None))))

    loop.run_round()  # one batch of trials
    assert set(trials[series_store.BUILD_BATCH :]) <= unbuilt()
    loop.run_round()  # the rest, in the next round (it found work: it goes on)
    assert not unbuilt()
    for trial in trials:
        _check(state, trial)


def test_a_new_trial_starts_built_so_the_loop_has_nothing_to_build(state: MasterState) -> None:
    """A trial created now has no reports: its stored data is built (empty) from the start, so
    the cluster loop's rounds do no building for the trials a search creates."""
    trials = _trials(state, 3)
    with state.sessions() as session:
        stored = session.scalars(select(Trial.summary_metrics).where(Trial.id.in_(trials)))
        assert list(stored) == [{}, {}, {}]
        assert series_store.build_pending(session) == 0
    _report(state, [MetricsInput(trials[0], 1, "validation", 1, {"loss": 0.5})])
    _check(state, trials[0])
    _check(state, trials[1])
