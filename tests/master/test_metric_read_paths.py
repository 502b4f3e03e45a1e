"""The metric read paths give what they gave before their rewrite, on SQLite and PostgreSQL.

- ``GET /api/v1/trials/metrics/trial_metrics`` writes its NDJSON lines directly, splicing each
  report's stored metrics JSON in: every line must parse to what the wire models wrote
  (``MetricsReportsResponse`` of ``report_to_wire`` in :mod:`tests.master.metric_reference`),
  keys in the same order.
- ``GET /api/v1/trials/{id}/metrics/series`` reads the value as JSON text and the report times of
  the kept points only: the points must be those of the reference (every report decoded, values
  through ``parse_metric_value``, finite only, the original LTTB).
- ``GET /api/v1/ui/experiments/{id}/metric-names`` takes a bounded number of queries however
  many trials, and lists what the per-trial reads listed.
- ``GET /api/v1/ui/trials/{id}/series`` carries each point's report time and epoch.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.trials import MetricsReportsResponse
from stalwart.master.app import create_app
from stalwart.master.db.tables import Experiment, MetricReport, Trial
from stalwart.master.services import metrics as metrics_svc
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from stalwart.master.ui.series import flatten
from tests.master.conftest import login
from tests.master.metric_reference import iter_metric_reports, report_to_wire
from tests.master.running_trials import running_trials

TRICKY: list[dict[str, Any]] = [
    {"loss": 0.30331272607892745, "acc": 1, "λ": -2.5e-7, "big": 12345678901234567890},
    {"loss": "NaN", "acc": True, "s": "1.5", "n": None, "huge": 1e300},
    {"loss": "Infinity", "nested": {"a1": {"gpu": 0.5}}, "list": [1, 2], 'q"uote': 3.0},
    {"loss": "-Infinity", "e\\scape": 4, "unicode": "ünï ✓", "newline": "a\nb"},
    {"loss": math.inf, "acc": math.nan},  # stored as the strings "Infinity" and "NaN"
    {"loss": 1e16, "acc": False, "empty": {}},
    {},
]


@pytest.fixture(params=["sqlite", "postgresql"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    """An in-process master on SQLite, then on PostgreSQL (skipped when unreachable)."""
    extra: dict[str, Any] = {}
    if request.param == "postgresql":
        extra["db"] = request.getfixturevalue("pg_url")
    settings = MasterSettings.model_validate({"home": tmp_path / "home", **extra})
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


def _state(client: TestClient) -> MasterState:
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


def _experiment(state: MasterState, trials: int) -> tuple[int, list[int]]:
    return running_trials(state, trials, activate=True)


def _report(state: MasterState, trial_id: int, group: str, steps: int, metrics: Any) -> None:
    batch: list[dict[str, Any]] | None = (
        [{"m": steps}, {"m": "NaN"}] if group == "training" and steps % 3 == 0 else None
    )
    when = "2026-01-02T03:04:05Z" if steps % 4 == 0 else None  # a whole second
    report = MetricsInput(trial_id, 1, group, steps, metrics, batch, when)
    with state.sessions() as session:
        report_metrics_many(session, [report])


def _lines(
    client: TestClient, headers: dict[str, str], trial_ids: Sequence[int], group: str
) -> Any:
    query = "&".join(f"trialIds={t}" for t in trial_ids)
    resp = client.get(
        f"/api/v1/trials/metrics/trial_metrics?{query}&group={group}", headers=headers
    )
    assert resp.status_code == 200, resp.text
    assert not resp.text or resp.text.endswith("\n")
    return [line for line in resp.text.split("\n") if line]


def _reference_lines(state: MasterState, trial_ids: Sequence[int], group: str) -> list[str]:
    """What the stream wrote before: ORM objects through the wire models."""
    out = []
    for batch in iter_metric_reports(state.sessions, trial_ids, group):
        body = MetricsReportsResponse(metrics=[report_to_wire(r) for r in batch])
        out.append('{"result":' + body.model_dump_json(by_alias=True) + "}")
    return out


def _canonical(line: str) -> str:
    """A line re-encoded after parsing: equal for equal JSON values with equal key order."""
    return json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))


def test_trial_metrics_stream_matches_the_wire_models(client: TestClient) -> None:
    state = _state(client)
    admin = login(client, "admin")
    _, (t1, t2) = _experiment(state, 2)
    for steps, metrics in enumerate(TRICKY * 3, start=1):
        _report(state, t1, "training", steps, metrics)
        _report(state, t2, "training", 100 - steps, metrics)  # out of step order
        if steps % 2:
            _report(state, t1, "validation", steps, metrics)
            _report(state, t1, "ünï", steps, metrics)
    for trial_ids, group in (([t1, t2], "training"), ([t1], "validation"), ([t1], "ünï")):
        lines = _lines(client, admin, trial_ids, group)
        reference = _reference_lines(state, trial_ids, group)
        assert len(lines) == len(reference) > 0
        assert [_canonical(a) for a in lines] == [_canonical(b) for b in reference]
    assert _lines(client, admin, [t2], "none") == []


def test_stream_lines_are_the_reference_bytes_but_for_metric_spacing(client: TestClient) -> None:
    """Everything outside a report's metrics values is byte for byte what the models wrote, and
    many batches page through the series as before."""
    state = _state(client)
    admin = login(client, "admin")
    _, (trial,) = _experiment(state, 1)
    reports = [
        MetricsInput(trial, 1, "training", step % 700, {"loss": step / 7}, None, None)
        for step in range(2_500)
    ]
    with state.sessions() as session:
        report_metrics_many(session, reports)
    lines = _lines(client, admin, [trial], "training")
    reference = _reference_lines(state, [trial], "training")
    assert [len(json.loads(line)["result"]["metrics"]) for line in lines] == [1000, 1000, 500]
    compact = [line.replace(", ", ",").replace(": ", ":") for line in lines]  # plain numbers
    assert compact == reference


def _reference_series(
    state: MasterState, trial_id: int, group: str, metric: str
) -> list[tuple[int, float, str | None]]:
    with state.sessions() as session:
        rows = session.scalars(
            select(MetricReport)
            .where(
                MetricReport.trial_id == trial_id,
                MetricReport.group == group,
                MetricReport.archived.is_(False),
            )
            .order_by(MetricReport.steps_completed, MetricReport.id)
        ).all()
    out = []
    for row in rows:
        value = metrics_svc.parse_metric_value((row.metrics or {}).get(metric))
        if value is not None and math.isfinite(value):
            out.append((row.steps_completed, value, wire_time(row.report_time)))
    return out


@pytest.mark.parametrize(
    "metric", ["loss", "acc", "λ", "big", "huge", "s", "n", "nested", "list", 'q"uote', "e\\scape"]
)
def test_series_keeps_the_old_semantics(client: TestClient, metric: str) -> None:
    """Numbers only (booleans, strings, the NaN/Infinity markers, null, objects and arrays are
    left out), with their exact stored value and their report time."""
    state = _state(client)
    admin = login(client, "admin")
    _, (trial,) = _experiment(state, 1)
    for steps, metrics in enumerate(TRICKY * 4, start=1):
        _report(state, trial, "training", steps, metrics)
    expected = _reference_series(state, trial, "training", metric)
    resp = client.get(
        f"/api/v1/trials/{trial}/metrics/series",
        params={"metric": metric, "maxPoints": 1000},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["total"] == len(expected)
    assert [(p["batches"], p["value"], p["time"]) for p in body["points"]] == expected


def test_series_downsampled_and_windowed_as_before(client: TestClient) -> None:
    """A series short enough for the points asked (at most 8 values a point), or a window of
    one, is thinned from every value with LTTB, as before stored series; a longer one from its
    stored rollups: the first, smallest, largest and last value of each bucket of ``8**L``
    values (in arrival order) at the finest level with at most ``2 * maxPoints`` buckets."""
    state = _state(client)
    admin = login(client, "admin")
    _, (trial,) = _experiment(state, 1)
    rng = random.Random(7)
    reports = []
    for step in range(1, 3_001):
        value: Any = rng.gauss(0, 1) + math.sin(step / 50)
        if step % 97 == 0:
            value = "NaN"
        reports.append(MetricsInput(trial, 1, "training", step, {"loss": value, "x": 1}))
    with state.sessions() as session:
        for chunk in range(0, len(reports), 700):  # stored series merge across batches
            report_metrics_many(session, reports[chunk : chunk + 700])
    full = _reference_series(state, trial, "training", "loss")
    cases: list[tuple[dict[str, int], int, list[tuple[int, float, str | None]] | None]] = [
        ({}, 1000, full),  # 2,970 values for 1,000 points: read whole
        ({"startBatches": 500, "endBatches": 2_600}, 250, None),  # a window: read whole
        ({}, 100, _m4(full, 8**2)),  # 47 buckets of 64 values
    ]
    for window, points, candidates in cases:
        lo = window.get("startBatches", 0)
        hi = window.get("endBatches", 10**9)
        expected = candidates or [p for p in full if lo <= p[0] <= hi]
        keep = _original_lttb([(float(s), v) for s, v, _ in expected], points)
        resp = client.get(
            f"/api/v1/trials/{trial}/metrics/series",
            params={"metric": "loss", "maxPoints": points, **window},
            headers=admin,
        )
        body = resp.json()
        assert body["total"] == len([p for p in full if lo <= p[0] <= hi])
        assert [(p["batches"], p["value"], p["time"]) for p in body["points"]] == [
            expected[i] for i in keep
        ]
        assert body["points"][0]["batches"] == expected[0][0]  # the ends are kept
        assert body["points"][-1]["batches"] == expected[-1][0]


def _m4(
    series: Sequence[tuple[int, float, str | None]], size: int
) -> list[tuple[int, float, str | None]]:
    """The first, smallest, largest and last point of each run of ``size`` points (ties: the
    earlier), in step order: what a chart reads from stored rollups."""
    out: list[tuple[int, float, str | None]] = []
    for start in range(0, len(series), size):
        bucket = series[start : start + size]
        low = min(bucket, key=lambda p: p[1])
        high = max(bucket, key=lambda p: p[1])
        for point in sorted({bucket[0], low, high, bucket[-1]}):
            out.append(point)
    return out


def _original_lttb(points: Sequence[tuple[float, float]], threshold: int) -> list[int]:
    """``downsample_lttb`` as it was before it was rewritten on two flat lists."""
    n = len(points)
    if threshold >= n or threshold < 3:
        return list(range(n))
    keep = [0]
    width = (n - 2) / (threshold - 2)
    previous = 0
    for bucket in range(threshold - 2):
        start = int(bucket * width) + 1
        stop = int((bucket + 1) * width) + 1
        next_start, next_stop = stop, min(int((bucket + 2) * width) + 1, n)
        if next_start >= next_stop:
            next_start, next_stop = n - 1, n
        span = next_stop - next_start
        avg_x = sum(p[0] for p in points[next_start:next_stop]) / span
        avg_y = sum(p[1] for p in points[next_start:next_stop]) / span
        ax, ay = points[previous]
        chosen, largest = start, -1.0
        for i in range(start, min(stop, n - 1)):
            bx, by = points[i]
            area = abs((ax - avg_x) * (by - ay) - (ax - bx) * (avg_y - ay))
            if area > largest:
                chosen, largest = i, area
        keep.append(chosen)
        previous = chosen
    keep.append(n - 1)
    return keep


def test_lttb_indices_are_the_original_ones() -> None:
    rng = random.Random(3)
    for n, threshold in ((10, 3), (1_000, 10), (5_000, 1_000), (20_001, 997), (50, 100)):
        xs = sorted(rng.uniform(0, 1e6) for _ in range(n))
        ys = [rng.choice((rng.gauss(0, 1), 1e300, -1e-300, 0.0)) for _ in range(n)]
        expected = _original_lttb(list(zip(xs, ys, strict=True)), threshold)
        assert metrics_svc.lttb_indices(xs, ys, threshold) == expected
        assert metrics_svc.downsample_lttb(list(zip(xs, ys, strict=True)), threshold) == expected


def _reference_names(state: MasterState, trial_ids: Sequence[int]) -> dict[str, list[str]]:
    """The per-trial reads of before: each group's first and last live report."""
    names: dict[str, set[str]] = {}
    with state.sessions() as session:
        for trial_id in trial_ids:
            live = select(MetricReport).where(
                MetricReport.trial_id == trial_id, MetricReport.archived.is_(False)
            )
            for report in session.scalars(live):
                names.setdefault(report.group, set())
            groups = {r.group for r in session.scalars(live)}
            for group in groups:
                ordered = session.scalars(
                    live.where(MetricReport.group == group).order_by(
                        MetricReport.steps_completed, MetricReport.id
                    )
                ).all()
                for row in (ordered[0], ordered[-1]):
                    names[group].update(name for name, _ in flatten(row.metrics or {}))
    return {group: sorted(found) for group, found in sorted(names.items())}


def _count_queries(client: TestClient, url: str, headers: dict[str, str]) -> tuple[int, Any]:
    engine = _state(client).engine
    count = 0

    def counter(*_: Any) -> None:
        nonlocal count
        count += 1

    event.listen(engine, "before_cursor_execute", counter)
    try:
        resp = client.get(url, headers=headers)
    finally:
        event.remove(engine, "before_cursor_execute", counter)
    assert resp.status_code == 200, resp.text
    return count, resp.json()


def test_experiment_metric_names_take_a_bounded_number_of_queries(client: TestClient) -> None:
    state = _state(client)
    admin = login(client, "admin")
    counts = []
    for trials in (3, 40):
        exp_id, trial_ids = _experiment(state, trials)
        reports = []
        for i, trial_id in enumerate(trial_ids):
            for steps in (5, 1, 9, 3):
                metrics: dict[str, Any] = {f"first{i % 3}": steps} if steps == 1 else {}
                if steps == 9:
                    metrics = {"last": 1.0, "agent": {"cpu": 2.0}, "bad": "NaN"}
                elif steps == 5:
                    metrics = {"middle_only": 1.0}  # neither first nor last: not listed
                reports.append(MetricsInput(trial_id, 1, "training", steps, metrics))
            reports.append(MetricsInput(trial_id, 1, "validation", 10, {"loss": i}))
            if i % 5 == 0:
                reports.append(MetricsInput(trial_id, 1, f"custom{i % 2}", 2, {"c": 1}))
        with state.sessions() as session:
            report_metrics_many(session, reports)
        count, body = _count_queries(client, f"/api/v1/ui/experiments/{exp_id}/metric-names", admin)
        counts.append(count)
        found = {g["group"]: g["metrics"] for g in body["groups"]}
        assert found == _reference_names(state, trial_ids)
        assert found["training"] == ["agent/cpu", "first0", "first1", "first2", "last"]
    # the same for 3 trials and 40: sign-in check, experiment, the two reads (and commits)
    assert counts[0] == counts[1] <= 8, counts


def test_metric_names_leave_out_archived_reports(client: TestClient) -> None:
    """A restarted run archives the reports beyond its restart step: their names go."""
    state = _state(client)
    admin = login(client, "admin")
    _, (trial,) = _experiment(state, 1)
    with state.sessions() as session:
        report_metrics_many(
            session,
            [
                MetricsInput(trial, 1, "training", 1, {"a": 1}),
                MetricsInput(trial, 1, "training", 10, {"old": 1}),
                MetricsInput(trial, 1, "gone", 10, {"g": 1}),
            ],
        )
        trial_row = session.get(Trial, trial)
        assert trial_row is not None
        trial_row.run_id = 2
        session.commit()
        report_metrics_many(session, [MetricsInput(trial, 2, "gone", 5, {"h": 1})])
        report_metrics_many(session, [MetricsInput(trial, 2, "training", 5, {"new": 1})])
    body = client.get(f"/api/v1/ui/trials/{trial}/metric-names", headers=admin).json()
    found = {g["group"]: g["metrics"] for g in body["groups"]}
    assert found == {"gone": ["h"], "training": ["a", "new"]}
    with state.sessions() as session:
        exp_id = session.scalars(select(Experiment.id)).all()[-1]
    body = client.get(f"/api/v1/ui/experiments/{exp_id}/metric-names", headers=admin).json()
    assert {g["group"]: g["metrics"] for g in body["groups"]} == found


def test_series_answered_again_only_while_the_trial_is_unchanged(client: TestClient) -> None:
    """The kept answer goes as soon as the trial has another report, in any group: a restarted
    run's first report of another group archives training reports, which must leave."""
    state = _state(client)
    admin = login(client, "admin")
    _, (trial,) = _experiment(state, 1)
    with state.sessions() as session:
        report_metrics_many(
            session, [MetricsInput(trial, 1, "training", s, {"loss": s}) for s in range(1, 11)]
        )
    url = f"/api/v1/trials/{trial}/metrics/series?metric=loss"

    def steps() -> list[int]:
        body = client.get(url, headers=admin).json()
        assert body["total"] == len(body["points"])
        return [p["batches"] for p in body["points"]]

    assert steps() == list(range(1, 11))
    assert steps() == list(range(1, 11))  # answered again
    _report(state, trial, "training", 11, {"loss": 11})
    assert steps() == list(range(1, 12))
    with state.sessions() as session:
        trial_row = session.get(Trial, trial)
        assert trial_row is not None
        trial_row.run_id = 2
        session.commit()
        report_metrics_many(session, [MetricsInput(trial, 2, "custom", 6, {"c": 1})])
    assert steps() == [1, 2, 3, 4, 5]
    assert [p[0] for p in _reference_series(state, trial, "training", "loss")] == [1, 2, 3, 4, 5]


def test_trial_series_carry_report_times_and_epochs(client: TestClient) -> None:
    """``GET /api/v1/ui/trials/{id}/series`` gives each kept point its report's time (seconds
    since the Unix epoch) and, when a report of the metric carries a top-level ``epoch``, its
    epoch (null for a report without one); ``epochs`` is null when none does."""
    state = _state(client)
    admin = login(client, "admin")
    _, (trial,) = _experiment(state, 1)
    times = ["2026-01-02T03:04:05Z", "2026-01-02T03:04:07Z", "2026-01-02T03:05:05Z"]
    with state.sessions() as session:
        report_metrics_many(
            session,
            [
                MetricsInput(trial, 1, "training", 10, {"loss": 3.0, "epoch": 1}, None, times[0]),
                MetricsInput(trial, 1, "training", 20, {"loss": 2.0}, None, times[1]),
                MetricsInput(trial, 1, "training", 30, {"loss": 1.0, "epoch": 3}, None, times[2]),
                MetricsInput(trial, 1, "validation", 30, {"loss": 1.5}, None, times[2]),
            ],
        )
    body = client.get(
        f"/api/v1/ui/trials/{trial}/series", params={"group": "training"}, headers=admin
    ).json()
    loss = next(s for s in body["series"] if s["metric"] == "loss")
    assert loss["batches"] == [10, 20, 30]
    assert loss["epochs"] == [1.0, None, 3.0]
    expected = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times]
    assert loss["times"] == expected
    epoch = next(s for s in body["series"] if s["metric"] == "epoch")
    assert epoch["epochs"] == [1.0, 3.0]
    body = client.get(
        f"/api/v1/ui/trials/{trial}/series", params={"group": "validation"}, headers=admin
    ).json()
    assert body["series"][0]["epochs"] is None
    assert body["series"][0]["times"] == [expected[2]]
