"""The web UI in a real browser against a real master: sign in, the experiments list, the
experiment page with its learning curves, and pause/activate from the UI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.examples.conftest import example_config
from tests.ui.conftest import CORE_API, HPSEARCH_OVERRIDES

if TYPE_CHECKING:
    from playwright.sync_api import Page


def sign_in(page: Page, url: str) -> None:
    """Open the UI and sign in as admin (empty password) with the keyboard."""
    page.goto(url + "/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("")
    page.get_by_label("Password").press("Enter")
    page.get_by_role("heading", name="Experiments").wait_for()


def validation_counts(exp: Experiment) -> dict[int, int]:
    """Each trial's number of current validation reports (what the chart must hold)."""
    return {t.id: sum(1 for r in t.metrics("validation") if not r.archived) for t in exp.trials()}


def test_sign_in_list_and_experiment_page(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """Sign in; the list shows the ASHA experiment; its page shows the trials and one chart
    line per trial holding every reported point, with a hover naming the trial."""
    page.goto(cluster.url + "/")
    page.get_by_role("heading", name="Sign in to Stalwart").wait_for()
    page.screenshot(path=artifacts / "01-sign-in.png")
    # A wrong password is refused and says so.
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").filter(has_text="Wrong username or password").wait_for()
    sign_in(page, cluster.url)
    token = page.evaluate("sessionStorage.getItem('stalwart.token')")
    assert token

    row = page.locator(f"#experiments tr[data-key='{asha.id}']")
    row.wait_for()
    assert row.locator("td").nth(1).inner_text() == asha.name
    assert row.locator("td").nth(2).inner_text() == "COMPLETED"
    assert row.locator("td").nth(4).inner_text() == "adaptive_asha"
    assert row.locator("td").nth(5).inner_text() == "4"
    assert row.locator("td").nth(7).inner_text() == "admin"
    assert row.get_by_role("button", name=f"Pause experiment {asha.id}").is_disabled()
    page.screenshot(path=artifacts / "02-experiments.png", full_page=True)

    row.get_by_role("link", name=asha.name).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}")
    page.locator("#trials tbody tr").nth(3).wait_for()
    expected = validation_counts(asha)
    assert len(expected) == 4
    # The trials table: one row per trial with its hyperparameters, state and best metric.
    header = page.locator("#trials thead th").all_inner_texts()
    assert header[:2] == ["Trial", "State"]
    assert {"batch_size", "batches", "lr"} <= set(header)
    assert "Best loss" in header
    for trial in asha.trials():
        cells = page.locator(f"#trials tr[data-key='{trial.id}'] td").all_inner_texts()
        assert cells[0] == str(trial.id)
        assert cells[1] == "COMPLETED"
        assert cells[header.index("batch_size")] == str(trial.hparams["batch_size"])
        float(cells[header.index("Best loss")])  # a number, not the "no value" dash

    # The chart: one path per trial, as many points as the trial reported.
    paths = page.locator("#chart path.series")
    paths.nth(3).wait_for(state="attached")  # a one-point path has no visible extent
    assert paths.count() == len(expected)
    drawn = {
        int(str(p.get_attribute("data-trial-id"))): int(str(p.get_attribute("data-points")))
        for p in paths.all()
    }
    assert drawn == expected
    # Each path's "d" has one command per point.
    for p in paths.all():
        d = str(p.get_attribute("d"))
        assert d.count("M") + d.count("L") == int(str(p.get_attribute("data-points")))

    # Hover the last point of one line: the tooltip names the trial.
    trial_id = max(expected, key=lambda t: expected[t])
    line = page.locator(f"#chart path.series[data-trial-id='{trial_id}']")
    end: dict[str, float] = line.evaluate(
        """(path) => {
            const p = path.getPointAtLength(path.getTotalLength());
            const m = path.getScreenCTM();
            return {x: p.x * m.a + p.y * m.c + m.e, y: p.x * m.b + p.y * m.d + m.f};
        }"""
    )
    page.mouse.move(end["x"] - 1, end["y"])
    tooltip = page.locator("#chart .tooltip")
    tooltip.wait_for(state="visible")
    assert f"Trial {trial_id}" in tooltip.inner_text()
    page.screenshot(path=artifacts / "03-experiment.png", full_page=True)

    # Keyboard: focusing a legend entry highlights its line and names it.
    page.mouse.move(0, 0)
    other = min(expected)
    page.locator(f"#chart .legend button[data-trial-id='{other}']").focus()
    assert f"Trial {other}" in tooltip.inner_text()
    assert "focused" in str(
        page.locator(f"#chart path.series[data-trial-id='{other}']").get_attribute("class")
    )

    # The log scale redraws the same lines.
    page.get_by_label("Log scale").check()
    page.locator("#chart text", has_text="loss (log)").wait_for()
    assert page.locator("#chart path.series").count() == len(expected)

    # The theme toggle flips data-theme and says so.
    before = page.evaluate("document.documentElement.dataset.theme")
    page.locator("#theme-toggle").click()
    after = page.evaluate("document.documentElement.dataset.theme")
    assert {before, after} == {"light", "dark"}
    assert (
        page.locator("#theme-toggle").get_attribute("aria-pressed") == str(after == "dark").lower()
    )
    page.screenshot(path=artifacts / f"04-experiment-{after}.png", full_page=True)


def test_pause_and_activate_from_the_list(
    page: Page, cluster: LocalCluster, client: Client, asha: Experiment, artifacts: Path
) -> None:
    """An experiment created paused is activated, then paused, with the list's buttons."""
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
        state = row.locator("td").nth(2)
        activate = row.get_by_role("button", name=f"Activate experiment {exp.id}")
        pause = row.get_by_role("button", name=f"Pause experiment {exp.id}")
        page.wait_for_function(
            f"document.querySelector(\"#experiments tr[data-key='{exp.id}'] td:nth-child(3)\")"
            "?.textContent === 'PAUSED'"
        )
        assert pause.is_disabled()
        activate.focus()
        page.keyboard.press("Enter")  # keyboard-operable
        page.wait_for_function(
            f"document.querySelector(\"#experiments tr[data-key='{exp.id}'] td:nth-child(3)\")"
            "?.textContent !== 'PAUSED'"
        )
        assert exp.reload().state in {"ACTIVE", "QUEUED", "RUNNING"}
        page.screenshot(path=artifacts / "05-activated.png", full_page=True)
        pause.click()
        page.wait_for_function(
            f"document.querySelector(\"#experiments tr[data-key='{exp.id}'] td:nth-child(3)\")"
            "?.textContent === 'PAUSED'"
        )
        assert state.inner_text() == "PAUSED"
        assert exp.reload().state == "PAUSED"
        page.screenshot(path=artifacts / "06-paused.png", full_page=True)
    finally:
        exp.kill()


def test_series_endpoint_downsamples(cluster: LocalCluster, asha: Experiment) -> None:
    """GET /api/v1/ui/experiments/{id}/series: every trial, capped at maxPoints each."""
    headers = _admin_headers(cluster.url)
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
    missing = httpx.get(
        f"{cluster.url}/api/v1/ui/experiments/999999/series",
        params={"metric": "loss"},
        headers=headers,
    )
    assert missing.status_code == 404
    assert httpx.get(url, params={"metric": "loss"}).status_code == 401


def _admin_headers(url: str) -> dict[str, str]:
    """``Authorization: Bearer`` with a fresh admin token."""
    answer = httpx.post(f"{url}/api/v1/auth/login", json={"username": "admin", "password": ""})
    answer.raise_for_status()
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def test_index_and_assets_are_served(cluster: LocalCluster) -> None:
    """``/`` is the page, its modules and styles are under ``/ui/``."""
    index = httpx.get(cluster.url + "/")
    assert index.status_code == 200
    assert '<script type="module" src="/ui/app.js">' in index.text
    for asset in ("app.js", "api.js", "chart.js", "style.css"):
        assert httpx.get(f"{cluster.url}/ui/{asset}").status_code == 200, asset
