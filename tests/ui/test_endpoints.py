"""The UI-only endpoints under /api/v1/ui over HTTP against the real master (no browser)."""

from __future__ import annotations

from pathlib import Path

import httpx

from stalwart.client import Experiment
from stalwart.local import LocalCluster
from stalwart.master.app import open_state
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.settings import MasterSettings
from stalwart.master.ui.series import SeriesCache, flatten, to_float
from tests.master.running_trials import running_trials
from tests.ui.conftest import admin_headers


def test_experiment_series_downsamples(cluster: LocalCluster, asha: Experiment) -> None:
    """GET /api/v1/ui/experiments/{id}/series: every trial, capped at maxPoints each."""
    headers = admin_headers(cluster.url)
    url = f"{cluster.url}/api/v1/ui/experiments/{asha.id}/series"
    full = httpx.get(url, params={"metric": "loss"}, headers=headers).json()
    assert {s["trialId"] for s in full["trials"]} == {t.id for t in asha.trials()}
    for series in full["trials"]:
        assert series["total"] == len(series["batches"]) == len(series["values"])
        assert series["batches"] == sorted(series["batches"])
    capped = httpx.get(url, params={"metric": "loss", "maxPoints": 3}, headers=headers).json()
    for series in capped["trials"]:
        assert len(series["batches"]) == min(3, series["total"])
    bad = httpx.get(url, params={"metric": "loss", "maxPoints": 2}, headers=headers)
    assert bad.status_code == 400
    assert "maxPoints must be between 3 and 10000" in bad.json()["message"]
    missing = httpx.get(
        f"{cluster.url}/api/v1/ui/experiments/999999/series",
        params={"metric": "loss"},
        headers=headers,
    )
    assert missing.status_code == 404
    assert httpx.get(url, params={"metric": "loss"}).status_code == 401


def test_metric_names_and_trial_series(cluster: LocalCluster, asha: Experiment) -> None:
    """Metric names per group (the profiler's groups flattened to agent/metric), and a trial's
    whole group with the same counts as the SDK reads."""
    headers = admin_headers(cluster.url)
    names = httpx.get(
        f"{cluster.url}/api/v1/ui/experiments/{asha.id}/metric-names", headers=headers
    ).json()
    groups = {g["group"]: g["metrics"] for g in names["groups"]}
    assert "loss" in groups["training"]
    assert "loss" in groups["validation"]
    assert any(name.endswith("/cpu_util_simple") for name in groups["cpu"]), groups
    trial = asha.trials()[0]
    answer = httpx.get(
        f"{cluster.url}/api/v1/ui/trials/{trial.id}/series",
        params={"group": "training", "maxPoints": 1000},
        headers=headers,
    ).json()
    by_name = {s["metric"]: s for s in answer["series"]}
    assert by_name["loss"]["total"] == sum(1 for r in trial.metrics("training") if not r.archived)
    only = httpx.get(
        f"{cluster.url}/api/v1/ui/trials/{trial.id}/series",
        params={"group": "training", "metrics": "loss"},
        headers=headers,
    ).json()
    assert [s["metric"] for s in only["series"]] == ["loss"]
    for path in ("metric-names", "series"):
        url = f"{cluster.url}/api/v1/ui/trials/{trial.id}/{path}"
        assert httpx.get(url).status_code == 401
        assert (
            httpx.get(url.replace(f"/{trial.id}/", "/999999/"), headers=headers).status_code == 404
        )


def test_flatten_and_to_float() -> None:
    """Nested profiler samples become agent/metric names; only finite numbers are kept."""
    sample = {"a1": {"cpu_util_simple": 12.5, "/": {"disk_util": 40}}, "n": "NaN", "ok": True}
    assert dict(flatten(sample)) == {"a1/cpu_util_simple": 12.5, "a1///disk_util": 40.0}
    assert to_float("0.5") == 0.5
    assert to_float("Infinity") is None
    assert to_float("x") is None
    assert to_float(None) is None


def test_series_cache_reads_again_only_what_changed(tmp_path: Path) -> None:
    """A cached series is served until its trial reports again; the cache stays within its
    bound on points, dropping the least recently used."""
    state = open_state(MasterSettings(home=tmp_path / "home"))
    _, (first, second) = running_trials(state, 2)

    def add(trial_id: int, steps: range) -> None:
        reports = [
            MetricsInput(trial_id, 1, "training", s, {"loss": 1 / s, "bad": "NaN"}) for s in steps
        ]
        with state.sessions() as session:
            report_metrics_many(session, reports)

    cache = SeriesCache(max_points=25)
    try:
        add(first, range(1, 101))
        add(second, range(1, 11))
        with state.sessions() as session:
            one = cache.experiment(session, [first, second], "training", "loss", 10)
            assert one[first].total == 100
            assert len(one[first].batches) == 10
            assert one[second].total == 10
            again = cache.experiment(session, [first, second], "training", "loss", 10)
            assert again[first] is one[first]
        add(second, range(11, 21))  # the second trial reports again: only it is read again
        with state.sessions() as session:
            two = cache.experiment(session, [first, second], "training", "loss", 10)
            assert two[first] is one[first]
            assert two[second].total == 20
            assert cache.experiment(session, [first], "training", "bad", 10)[first].total == 0
            cache.experiment(session, [first, second], "training", "loss", 20)  # over the bound
            three = cache.experiment(session, [first, second], "training", "loss", 10)
            assert three[first] is not one[first]
            assert three[first] == one[first]
    finally:
        state.engine.dispose()
