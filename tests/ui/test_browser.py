"""The web UI in a real browser against a real master: sign in, the experiments list and its
filters, the experiment page (learning curves of any metric, scatter; the trials and
checkpoints tabs), and
pause/activate from the UI. Every wait is Playwright's auto-waiting ``expect`` (no sleeps)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from stalwart.master.services.trials import ACTIVE_SUBSTATES
from stalwart.master.ui import ASSET_CACHE
from tests.examples.conftest import example_config
from tests.ui.conftest import CORE_API, HPSEARCH_OVERRIDES, admin_headers, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

NO_VALUE = "\u2013"
"""What a cell without a value shows (an en dash)."""


def validation_counts(exp: Experiment, group: str = "validation") -> dict[int, int]:
    """Each trial's number of current reports of ``group`` (what the chart must hold)."""
    return {t.id: sum(1 for r in t.metrics(group) if not r.archived) for t in exp.trials()}


def chart_lines(page: Page, selector: str) -> dict[int, dict[str, str]]:
    """``data-trial-id`` -> the data attributes of each line of the chart under ``selector``
    (its DOM twin: the legend's ``li.series``, since uPlot draws on canvas)."""
    out: dict[int, dict[str, str]] = {}
    for item in page.locator(f"{selector} li.series").all():
        attrs: dict[str, str] = item.evaluate(
            "(li) => Object.fromEntries(Object.entries(li.dataset))"
        )
        out[int(attrs["trialId"])] = attrs
    return out


def served_series(url: str, exp_id: int, metric: str, group: str) -> dict[int, dict[str, Any]]:
    """The experiment series endpoint's answer (what the page draws), by trial id."""
    answer = httpx.get(
        f"{url}/api/v1/ui/experiments/{exp_id}/series",
        params={"metric": metric, "group": group, "maxPoints": 1000},
        headers=admin_headers(url),
    ).json()
    return {s["trialId"]: s for s in answer["trials"]}


def test_sign_in_list_and_experiment_page(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """Sign in; the list shows the ASHA experiment; its page shows the trials and one chart
    line per trial holding every reported point, with a hover naming the trial."""
    from playwright.sync_api import expect

    page.goto(cluster.url + "/")
    expect(page.get_by_role("heading", name="Sign in to Stalwart")).to_be_visible()
    page.screenshot(path=artifacts / "01-sign-in.png")
    # A wrong password is refused and says so.
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Wrong username or password")
    sign_in(page, cluster.url)
    assert page.evaluate("sessionStorage.getItem('stalwart.token')")

    row = page.locator(f"#experiments tr[data-key='{asha.id}']")

    def cell(name: str) -> Any:
        return row.locator(f"td[data-col='{name}']")

    expect(cell("name")).to_have_text(asha.name)
    expect(cell("state")).to_have_text("COMPLETED")
    expect(cell("searcherType")).to_have_text("adaptive_asha")
    expect(cell("numTrials")).to_have_text("4")
    expect(cell("user")).to_have_text("admin")
    # The Best metric column: the experiment's best searcher metric, as the API gives it.
    expect(cell("searcherMetricsVal")).not_to_have_text(NO_VALUE)
    expect(row.get_by_role("button", name=f"Pause experiment {asha.id}")).to_be_disabled()
    page.screenshot(path=artifacts / "02-experiments.png", full_page=True)

    row.get_by_role("link", name=asha.name).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}")
    expected = validation_counts(asha)
    assert len(expected) == 4
    # The trials table is the Trials tab (kept in the address).
    page.get_by_role("link", name="Trials", exact=True).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}/trials")
    expect(page.locator("#trials tbody tr")).to_have_count(4)
    # The trials table: one row per trial with its hyperparameters, state and best metric.
    header = page.locator("#trials thead th").all_inner_texts()
    assert header[:2] == ["Trial", "State"]
    assert {"batch_size", "batches", "lr", "Latest loss", "Best loss"} <= set(header)
    for trial in asha.trials():
        trial_cells = page.locator(f"#trials tr[data-key='{trial.id}'] td")
        expect(trial_cells.nth(1)).to_have_text("COMPLETED")
        texts = trial_cells.all_inner_texts()
        assert texts[0] == str(trial.id)
        assert texts[header.index("batch_size")] == str(trial.hparams["batch_size"])
        float(texts[header.index("Best loss")])  # a number, not the "no value" dash
    page.get_by_role("link", name="Overview", exact=True).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}")

    # The chart: one line per trial, as many points as the trial reported, ending on the
    # trial's latest value (read from the chart's DOM twin, the legend).
    items = page.locator("#chart li.series")
    expect(items).to_have_count(len(expected))
    lines = chart_lines(page, "#chart")
    assert {t: int(a["points"]) for t, a in lines.items()} == expected
    assert {t: int(a["drawn"]) for t, a in lines.items()} == expected
    served = served_series(cluster.url, asha.id, "loss", "validation")
    for trial_id, attrs in lines.items():
        last = served[trial_id]["values"][-1]
        assert abs(float(attrs["last"]) - last) <= abs(last) * 1e-9

    # Hover the last point of the longest line: the tooltip names a trial with a point there
    # (lines of ASHA trials that stopped at the same batch may end on the same spot).
    # Once the page is complete (nothing above the chart moves any more), the cursor enters the
    # plot and comes to rest on that point.
    expect(page.locator("#scatter button.point")).to_have_count(len(expected))
    trial_id = max(expected, key=lambda t: expected[t])
    lines = chart_lines(page, "#chart")
    over = page.locator("#chart .u-over").bounding_box()
    assert over is not None
    left, top = (float(v) for v in lines[trial_id]["end"].split(","))
    page.mouse.move(over["x"] + over["width"] / 2, over["y"] + over["height"] / 2)
    page.mouse.move(over["x"] + left, over["y"] + top, steps=4)
    tooltip = page.locator("#chart .tooltip")
    expect(tooltip).to_be_visible()
    expect(tooltip).to_have_text(re.compile(r"Trial \d+ · batches \d+ · "))
    found = re.findall(r"Trial (\d+) · batches (\d+)", tooltip.inner_text())[0]
    named, batch = int(found[0]), int(found[1])
    target = served[trial_id]
    assert batch == target["batches"][-1]
    there = served[named]
    assert batch in there["batches"]
    value = there["values"][there["batches"].index(batch)]
    values = [v for series in served.values() for v in series["values"]]
    assert abs(value - target["values"][-1]) <= (max(values) - min(values)) * 0.05
    page.screenshot(path=artifacts / "03-experiment.png", full_page=True)

    # Keyboard: focusing a legend entry highlights its line and names it.
    page.mouse.move(0, 0)
    other = min(expected)
    page.locator(f"#chart li.series[data-trial-id='{other}'] button").focus()
    expect(tooltip).to_contain_text(f"Trial {other} ")
    expect(page.locator(f"#chart li.series[data-trial-id='{other}']")).to_have_class(
        re.compile(r"\bfocused\b")
    )

    # The log scale redraws the same lines.
    page.get_by_label("Log scale", exact=True).check()
    expect(page.locator("#chart [role=img]")).to_have_attribute(
        "aria-label", re.compile(r"validation loss \(log\) against batches")
    )
    expect(page.locator("#chart li.series")).to_have_count(len(expected))

    # The theme toggle flips data-theme and says so.
    before = page.evaluate("document.documentElement.dataset.theme")
    page.locator("#theme-toggle").click()
    after = "dark" if before == "light" else "light"
    expect(page.locator("html")).to_have_attribute("data-theme", after)
    expect(page.locator("#theme-toggle")).to_have_attribute(
        "aria-pressed", str(after == "dark").lower()
    )
    page.screenshot(path=artifacts / f"04-experiment-{after}.png", full_page=True)


def test_the_scatter_fills_in_when_the_trials_arrive_after_the_curves(
    page: Page, cluster: LocalCluster, asha: Experiment
) -> None:
    """The curves need only the experiment; on a big search (or a busy master) its trials list
    arrives later. The scatter, first shown without points, draws them once the trials come
    (here the first trials read fails, and the page's next poll brings them)."""
    from playwright.sync_api import Route, expect

    failed: list[str] = []

    def fail_once(route: Route) -> None:
        if failed:
            route.continue_()
            return
        failed.append(route.request.url)
        route.abort()

    sign_in(page, cluster.url)
    page.route(re.compile(rf".*/api/v1/experiments/{asha.id}/trials\?.*"), fail_once)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#scatter .empty")).to_be_visible()  # curves first, no trials yet
    expect(page.locator("#scatter button.point")).to_have_count(4)
    assert failed


def test_any_metric_scatter_and_checkpoints(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """The metric picker draws training loss (every trial, every point, same as the API); the
    scatter has a point per trial at its hyperparameter and latest value; the checkpoints table
    lists the experiment's checkpoints; the choice survives a reload (it is in the hash)."""
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#chart li.series")).to_have_count(4)
    page.get_by_label("Metrics", exact=True).select_option("training")
    expect(page.locator("#curve-metric option", has_text="loss")).to_have_count(1)
    page.get_by_label("Metric", exact=True).select_option("loss")
    expect(page.locator("#chart-title")).to_have_text("Learning curves: training loss")
    expected = validation_counts(asha, "training")
    served = httpx.get(
        f"{cluster.url}/api/v1/ui/experiments/{asha.id}/series",
        params={"metric": "loss", "group": "training", "maxPoints": 1000},
        headers=admin_headers(cluster.url),
    ).json()
    assert {s["trialId"]: s["total"] for s in served["trials"]} == expected
    for trial_id, count in expected.items():
        line = page.locator(f"#chart li.series[data-trial-id='{trial_id}']")
        expect(line).to_have_attribute("data-points", str(count))
        expect(line).to_have_attribute("data-drawn", str(count))  # what uPlot holds
    assert "group=training" in page.url
    assert "metric=loss" in page.url

    # Scatter: lr against the latest training loss, one focusable point per trial.
    page.get_by_label("Hyperparameter", exact=True).select_option("lr")
    points = page.locator("#scatter button.point")
    expect(points).to_have_count(4)
    latest = {s["trialId"]: s["values"][-1] for s in served["trials"]}
    hparams = {t.id: t.hparams for t in asha.trials()}
    for trial_id, value in latest.items():
        label = str(
            points.and_(page.locator(f"[data-trial-id='{trial_id}']")).get_attribute("aria-label")
        )
        assert label.startswith(f"Trial {trial_id}: lr ")
        x, y = (float(v) for v in re.findall(r"(?:lr|loss) (-?[\d.e+-]+)", label))
        assert abs(x - float(hparams[trial_id]["lr"])) <= abs(x) * 1e-3
        assert abs(y - value) <= abs(value) * 1e-3
    points.first.focus()
    expect(page.locator("#scatter .tooltip")).to_contain_text("Trial ")

    page.screenshot(path=artifacts / "07-experiment-training-loss.png", full_page=True)

    # Checkpoints (their tab): as many rows as the API lists that are not DELETED.
    listed = httpx.get(
        f"{cluster.url}/api/v1/experiments/{asha.id}/checkpoints",
        headers=admin_headers(cluster.url),
    ).json()["checkpoints"]
    kept = [c for c in listed if c["state"] != "STATE_DELETED"]
    assert kept, "the ASHA trials save checkpoints"
    page.get_by_role("link", name="Checkpoints", exact=True).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}/checkpoints?*")
    expect(page.locator("#checkpoints tbody tr")).to_have_count(min(len(kept), 100))
    page.get_by_role("link", name="Overview", exact=True).click()
    expect(page.locator("#chart-title")).to_have_text("Learning curves: training loss")

    # The picked metric is in the hash: a reload shows the same chart.
    page.reload()
    expect(page.locator("#chart-title")).to_have_text("Learning curves: training loss")
    expect(page.get_by_label("Metrics", exact=True)).to_have_value("training")

    # Enter on a scatter point opens the trial page.
    page.locator("#scatter button.point").first.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*#/trials/\d+$"))


def test_list_filters_kept_in_the_hash(
    page: Page, cluster: LocalCluster, client: Client, asha: Experiment, artifacts: Path
) -> None:
    """State, user, label and text filters narrow the list as the API does, and live in the URL
    hash (a reload or a shared link keeps them)."""
    from playwright.sync_api import expect

    config = example_config(
        CORE_API / "3_hpsearch.yaml",
        {**HPSEARCH_OVERRIDES, "name": "ui-filter-me", "labels": ["ui-filter"]},
    )
    other = client.create_experiment(config, CORE_API, activate=False)
    try:
        sign_in(page, cluster.url)
        rows = page.locator("#experiments tbody tr")
        expect(page.locator(f"#experiments tr[data-key='{other.id}']")).to_be_visible()
        page.get_by_label("State", exact=True).select_option("PAUSED")
        expect(page.locator(f"#experiments tr[data-key='{asha.id}']")).to_have_count(0)
        expect(page.locator(f"#experiments tr[data-key='{other.id}']")).to_be_visible()
        assert "state=PAUSED" in page.url
        page.get_by_label("State", exact=True).select_option("")
        page.get_by_label("Label", exact=True).fill("ui-filter")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-key", str(other.id))
        page.get_by_label("Label", exact=True).fill("")
        page.get_by_label("Name contains", exact=True).fill(asha.name)
        expect(page.locator(f"#experiments tr[data-key='{other.id}']")).to_have_count(0)
        expect(page.locator(f"#experiments tr[data-key='{asha.id}']")).to_be_visible()
        page.get_by_label("User", exact=True).select_option("admin")
        expect(page.locator(f"#experiments tr[data-key='{asha.id}']")).to_be_visible()
        assert "user=admin" in page.url
        assert "q=" in page.url
        # A link with filters opens filtered.
        page.goto(f"{cluster.url}/#/experiments?label=ui-filter")
        page.reload()
        expect(page.get_by_label("Label", exact=True)).to_have_value("ui-filter")
        expect(rows).to_have_count(1)
        page.screenshot(path=artifacts / "08-experiments-filtered.png", full_page=True)
        page.get_by_role("button", name="Clear filters").click()
        expect(page.locator(f"#experiments tr[data-key='{asha.id}']")).to_be_visible()
    finally:
        other.kill()


def test_pause_and_activate_from_the_list(
    page: Page, cluster: LocalCluster, client: Client, asha: Experiment, artifacts: Path
) -> None:
    """An experiment created paused is activated, then paused, with the list's buttons."""
    from playwright.sync_api import expect

    config = example_config(
        CORE_API / "3_hpsearch.yaml",
        {
            **HPSEARCH_OVERRIDES,
            "name": "ui-pause",
            "hyperparameters.batches": 100,
            "searcher.max_time": 100,
        },
    )
    exp = client.create_experiment(config, CORE_API, activate=False)
    try:
        sign_in(page, cluster.url)
        row = page.locator(f"#experiments tr[data-key='{exp.id}']")
        state = row.locator("td[data-col='state']")
        activate = row.get_by_role("button", name=f"Activate experiment {exp.id}")
        pause = row.get_by_role("button", name=f"Pause experiment {exp.id}")
        expect(state).to_have_text("PAUSED")
        expect(pause).to_be_disabled()
        activate.focus()
        page.keyboard.press("Enter")  # keyboard-operable
        expect(state).not_to_have_text("PAUSED")
        assert exp.reload().state in {"ACTIVE", *ACTIVE_SUBSTATES}  # STARTING as the agent forks
        page.screenshot(path=artifacts / "05-activated.png", full_page=True)
        expect(pause).to_be_enabled()
        pause.click()
        expect(state).to_have_text("PAUSED")
        assert exp.reload().state == "PAUSED"
        page.screenshot(path=artifacts / "06-paused.png", full_page=True)
    finally:
        exp.kill()


def test_index_and_assets_are_served(cluster: LocalCluster) -> None:
    """``/`` is the built page (never cached); the bundles it names are under ``/ui/assets/``,
    cached for good (their names carry their content's hash)."""
    index = httpx.get(cluster.url + "/")
    assert index.status_code == 200
    assert index.headers["cache-control"] == "no-cache"
    assets = re.findall(r'(?:src|href)="(/ui/assets/[^"]+)"', index.text)
    assert any(a.endswith(".js") for a in assets), index.text
    assert any(a.endswith(".css") for a in assets), index.text
    for asset in assets:
        answer = httpx.get(cluster.url + asset)
        assert answer.status_code == 200, asset
        assert answer.headers["cache-control"] == ASSET_CACHE, asset
    assert httpx.get(cluster.url + "/ui/assets/missing.js").status_code == 404


def test_not_found_pages(page: Page, cluster: LocalCluster) -> None:
    """An experiment or trial that does not exist says so (no actions, no toast every poll),
    and an unknown address says the page is not found instead of showing the list."""
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/999999")
    expect(page.get_by_role("heading", name="Experiment 999999 not found")).to_be_visible()
    expect(page.locator("[data-action]")).to_have_count(0)
    expect(page.locator("#toast")).to_have_text("")
    page.goto(f"{cluster.url}/#/trials/999999")
    expect(page.get_by_role("heading", name="Trial 999999 not found")).to_be_visible()
    page.goto(f"{cluster.url}/#/nowhere")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    page.get_by_role("link", name="Go to the experiments").click()
    expect(page.get_by_role("heading", name="Experiments", exact=True)).to_be_visible()
