"""The experiment page's Hyperparameters tab in a real browser, on the completed ASHA search of
the package's master and agent: parallel coordinates (a line per trial in its colour through
every hyperparameter and the searcher metric, brushing, hover, click), the scatter matrix and
the heat map, each read through its DOM twin and compared with the trials API."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.examples.conftest import completed
from tests.ui.conftest import admin_headers, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page


def trial_color(trial_id: int) -> str:
    """What ``colors.ts``' ``trialColor`` answers (the hue turns by the golden angle)."""
    return f"hsl({(trial_id * 137.508) % 360:.1f}, 70%, 48%)"


def _trials(url: str, experiment_id: int) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{url}/api/v1/experiments/{experiment_id}/trials", headers=admin_headers(url)
    )
    answer.raise_for_status()
    trials: list[dict[str, Any]] = answer.json()["trials"]
    return trials


def test_parallel_coordinates_show_every_trial_and_brush(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """One line per trial in its colour, carrying its hyperparameters and searcher metric; the
    axes are typed by the config (lr log, batch_size categorical); brushing the metric axis
    lights only the trials inside; hovering names a trial, clicking opens it."""
    from playwright.sync_api import expect

    trials = _trials(cluster.url, asha.id)
    assert len(trials) == 4
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}/hyperparameters")
    expect(page.locator("#experiment-tabs a[data-tab=hyperparameters]")).to_have_attribute(
        "aria-current", "page"
    )
    lines = page.locator("#parallel path.pc-line")
    expect(lines).to_have_count(len(trials))
    for t in trials:
        line = page.locator(f"#parallel path.pc-line[data-trial-id='{t['id']}']")
        expect(line).to_have_attribute("data-color", trial_color(t["id"]))
        values = json.loads(line.get_attribute("data-values") or "{}")
        assert values == {**t["hparams"], "metric": t["searcherMetricValue"]}
    kinds = {
        axis.get_attribute("data-key"): axis.get_attribute("data-kind")
        for axis in page.locator("#parallel g.pc-axis").all()
    }
    assert kinds == {
        "batch_size": "categorical",
        "batches": "linear",
        "lr": "log",
        "metric": "linear",
    }
    metrics = [t["searcherMetricValue"] for t in trials]
    metric_axis = page.locator("#parallel g.pc-axis[data-key=metric]")
    assert float(metric_axis.get_attribute("data-min") or "nan") == min(metrics)
    assert float(metric_axis.get_attribute("data-max") or "nan") == max(metrics)
    expect(page.locator("#pc-count")).to_have_attribute("data-lit", "4")

    # Hover: a point of the best trial's line that no other element covers names it.
    best = min(trials, key=lambda t: t["searcherMetricValue"])
    worst = max(trials, key=lambda t: t["searcherMetricValue"])
    where = page.locator(f"#parallel path.pc-line[data-trial-id='{best['id']}']").evaluate(
        """(path) => {
          const total = path.getTotalLength();
          const m = path.getScreenCTM();
          for (let k = 1; k < 200; k += 1) {
            const p = path.getPointAtLength((total * k) / 200).matrixTransform(m);
            if (document.elementFromPoint(p.x, p.y) === path) return [p.x, p.y];
          }
          return null;
        }"""
    )
    assert where is not None
    page.mouse.move(where[0], where[1])
    expect(page.locator("#parallel .tooltip")).to_contain_text(f"Trial {best['id']}:")
    page.mouse.move(0, 0)

    # Brush the metric axis from its middle down past its bottom (the smallest loss).
    area = page.locator("#parallel rect.pc-brush-area[data-axis=metric]")
    box = area.bounding_box()
    assert box is not None
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + box["height"] * 0.5)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] + 20, steps=5)
    page.mouse.up()
    brush = metric_axis.get_attribute("data-brush")
    assert brush is not None
    lo, hi = (float(v) for v in brush.split(","))
    inside = {t["id"] for t in trials if lo <= t["searcherMetricValue"] <= hi}
    assert best["id"] in inside
    assert worst["id"] not in inside
    for t in trials:
        expect(
            page.locator(f"#parallel path.pc-line[data-trial-id='{t['id']}']")
        ).to_have_attribute("data-active", "true" if t["id"] in inside else "false")
    expect(page.locator("#pc-count")).to_have_attribute("data-lit", str(len(inside)))
    page.screenshot(path=str(artifacts / "45-hyperparameters-brushed.png"), full_page=True)
    page.locator("#pc-clear").click()
    expect(page.locator("#pc-count")).to_have_attribute("data-lit", "4")

    # A click on a line opens its trial.
    page.locator(f"#parallel path.pc-line[data-trial-id='{best['id']}']").focus()
    page.keyboard.press("Enter")
    expect(
        page.get_by_role("heading", name=f"Trial {best['id']} of experiment {asha.id}")
    ).to_be_visible()


def test_scatter_matrix_and_heat_map_hold_the_trials(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """The scatter matrix has a pane per varying numeric hyperparameter against the metric,
    its points at the trials' values; the heat map's cells hold every trial with a metric once,
    each cell the best (then the mean) metric of its trials, with a legend of the range."""
    from playwright.sync_api import expect

    trials = _trials(cluster.url, asha.id)
    by_id = {t["id"]: t for t in trials}
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}/hyperparameters")
    figures = page.locator("#scatter-matrix figure")
    # lr is the only numeric hyperparameter that varies (batches is a constant, batch_size
    # categorical): one pane, lr against the metric.
    expect(figures).to_have_count(1)
    expect(figures).to_have_attribute("data-key", "lr|metric")
    points = page.locator("#scatter-matrix figure[data-key='lr|metric'] button.point")
    expect(points).to_have_count(len(trials))
    for point in points.all():
        t = by_id[int(point.get_attribute("data-trial-id") or "0")]
        assert float(point.get_attribute("data-x") or "nan") == t["hparams"]["lr"]
        assert float(point.get_attribute("data-y") or "nan") == t["searcherMetricValue"]
        assert point.get_attribute("data-color") == trial_color(t["id"])
    # lr is a log axis: its minor ticks are unlabelled, never the en dash of a missing value,
    # and what is labelled is a number.
    plot = page.locator("#scatter-matrix figure[data-key='lr|metric'] .uplot")
    expect(plot).to_have_attribute("data-x-ticks", re.compile(r"\["))
    for key in ("data-x-ticks", "data-y-ticks"):
        labels = json.loads(plot.get_attribute(key) or "[]")
        assert "\u2013" not in labels, (key, labels)
        assert any(labels), (key, labels)
        for label in labels:
            if label:
                float(label)  # a number, as fmt writes it

    expect(page.locator("#heat-x")).to_have_value("lr")
    expect(page.locator("#heat-y")).to_have_value("batch_size")
    for how, combine in (("best", min), ("mean", lambda v: sum(v) / len(v))):
        page.locator("#heat-how").select_option(how)
        cells = page.locator("#heatmap rect.hm-cell")
        expect(cells.first).to_be_visible()
        seen: list[int] = []
        values: list[float] = []
        for cell in cells.all():
            ids = [int(i) for i in (cell.get_attribute("data-trials") or "").split(",")]
            seen.extend(ids)
            assert all(
                str(by_id[i]["hparams"]["batch_size"]) == cell.get_attribute("data-y") for i in ids
            )
            value = float(cell.get_attribute("data-value") or "nan")
            assert abs(value - combine([by_id[i]["searcherMetricValue"] for i in ids])) < 1e-9
            assert int(cell.get_attribute("data-count") or "0") == len(ids)
            values.append(value)
        assert sorted(seen) == sorted(
            t["id"] for t in trials if t["searcherMetricValue"] is not None
        )
        legend = page.locator("#hm-legend")
        assert float(legend.get_attribute("data-min") or "nan") == min(values)
        assert float(legend.get_attribute("data-max") or "nan") == max(values)
    page.screenshot(path=str(artifacts / "46-hyperparameters-matrix-heatmap.png"), full_page=True)


def ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's debiased exponential moving average (what ``smoothing.ts`` draws)."""
    last = 0.0
    out = []
    for n, value in enumerate(values, start=1):
        last = last * weight + (1 - weight) * value
        out.append(last / (1 - weight**n))
    return out


def test_trial_smoothing_draws_the_ema_and_keeps_the_raw_line(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """The trial page's Smoothing slider draws each metric line as the debiased EMA of the
    values the series endpoint serves and keeps the raw line, faint, beside it; back at 0 only
    the raw lines are drawn."""
    from playwright.sync_api import expect

    trial = max(_trials(cluster.url, asha.id), key=lambda t: t["totalBatchesProcessed"])
    answer = httpx.get(
        f"{cluster.url}/api/v1/ui/trials/{trial['id']}/series",
        params={"group": "validation", "maxPoints": 1000},
        headers=admin_headers(cluster.url),
    )
    answer.raise_for_status()
    values = next(s["values"] for s in answer.json()["series"] if s["metric"] == "loss")
    assert len(values) >= 2
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/trials/{trial['id']}")
    chart = page.locator("#metric-charts figure[data-key=loss]")
    line = chart.locator("li.series[data-series-id=validation]")
    expect(line).to_have_attribute("data-points", str(len(values)))
    assert float(line.get_attribute("data-last") or "nan") == values[-1]
    expect(chart.locator("li.series[data-raw=true]")).to_have_count(0)

    page.locator("#smoothing").fill("0.6")
    expect(page.locator("#smoothing-value")).to_have_text("0.60")
    raw = chart.locator("li.series[data-series-id='validation raw']")
    expect(raw).to_have_attribute("data-raw", "true")
    expect(raw).to_have_attribute("data-points", str(len(values)))
    assert float(raw.get_attribute("data-last") or "nan") == values[-1]
    smoothed = float(line.get_attribute("data-last") or "nan")
    assert smoothed == pytest.approx(ema(values, 0.6)[-1], rel=1e-12)
    assert smoothed != pytest.approx(values[-1], rel=1e-6)
    expect(line).to_have_attribute("data-drawn", str(len(values)))
    page.screenshot(path=str(artifacts / "47-trial-smoothed.png"), full_page=True)

    page.locator("#smoothing").fill("0")
    expect(chart.locator("li.series[data-raw=true]")).to_have_count(0)
    assert float(line.get_attribute("data-last") or "nan") == values[-1]


def test_trial_x_axis_and_system_metrics_against_wall_time(
    page: Page, cluster: LocalCluster, asha: Experiment
) -> None:
    """The trial page's X axis picker draws the metrics against wall time (seconds since the
    trial started, from the reports' times the series endpoint serves); epochs are offered only
    when reports carry an epoch; system metrics are always against wall time."""
    from playwright.sync_api import expect

    trial = max(_trials(cluster.url, asha.id), key=lambda t: t["totalBatchesProcessed"])
    answer = httpx.get(
        f"{cluster.url}/api/v1/ui/trials/{trial['id']}/series",
        params={"group": "validation", "maxPoints": 1000},
        headers=admin_headers(cluster.url),
    )
    answer.raise_for_status()
    loss = next(s for s in answer.json()["series"] if s["metric"] == "loss")
    assert loss["epochs"] is None  # the example reports no epoch
    assert len(loss["times"]) == len(loss["batches"])
    start = datetime.fromisoformat(trial["startTime"].replace("Z", "+00:00")).timestamp()
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/trials/{trial['id']}")
    line = page.locator("#metric-charts figure[data-key=loss] li.series[data-series-id=validation]")
    expect(line).to_have_attribute("data-x-last", str(loss["batches"][-1]))
    expect(page.locator("#x-axis option")).to_have_text(["batches", "wall time"])

    page.locator("#x-axis").select_option("time")
    chart = page.locator("#metric-charts figure[data-key=loss] .uplot")
    expect(chart).to_have_attribute(
        "aria-label", re.compile("against seconds since the trial started")
    )
    expect(line).to_have_attribute("data-points", str(len(loss["values"])))
    shown = float(line.get_attribute("data-x-last") or "nan")
    assert shown == pytest.approx(loss["times"][-1] - start, abs=0.01)
    assert shown > 0

    system = page.locator("#system-charts figure[data-key='cpu/cpu_util_simple'] .uplot")
    expect(system).to_have_attribute(
        "aria-label", re.compile("against seconds since the trial started")
    )


EPOCHS_TRIAL = """\
import stalwart as det

with det.core.init() as core_context:
    for step in range(1, 7):
        metrics = {"loss": 1.0 / step, "epoch": step / 2}
        core_context.train.report_training_metrics(steps_completed=10 * step, metrics=metrics)
"""


def test_trial_x_axis_epochs_when_reports_carry_one(
    page: Page, cluster: LocalCluster, client: Client, tmp_path: Path
) -> None:
    """Reports that carry an ``epoch`` offer the epochs x axis, which draws each point at its
    report's epoch."""
    from playwright.sync_api import expect

    (tmp_path / "epochs.py").write_text(EPOCHS_TRIAL)
    config = (
        "name: epochs\nentrypoint: python3 epochs.py\nmax_restarts: 0\n"
        "searcher: {name: single, metric: loss, max_length: {batches: 60}}\n"
    )
    exp = client.create_experiment(config, tmp_path)
    completed(exp, timeout=120)
    (trial,) = exp.trials()
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/trials/{trial.id}")
    expect(page.locator("#x-axis option")).to_have_text(["batches", "epochs", "wall time"])
    line = page.locator("#metric-charts figure[data-key=loss] li.series[data-series-id=training]")
    expect(line).to_have_attribute("data-x-last", "60")
    page.locator("#x-axis").select_option("epochs")
    chart = page.locator("#metric-charts figure[data-key=loss] .uplot")
    expect(chart).to_have_attribute("aria-label", re.compile("against epochs"))
    expect(line).to_have_attribute("data-x-last", "3")
    expect(line).to_have_attribute("data-points", "6")
