"""The Cluster page's usage over time against the package's master and agent, after the
completed ASHA search held its slots: a chart of slot-hours per day over the last 30 days whose
twin (the days with usage, the total) holds what ``GET /api/v1/resources/allocation/aggregated``
serves, and a user who is not an admin told usage is for administrators."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from stalwart.client import Experiment
from stalwart.local import LocalCluster
from tests.ui.conftest import admin_headers, sign_in
from tests.ui.test_org import sign_in_as

if TYPE_CHECKING:
    from playwright.sync_api import Page

DAYS = 30
"""The window the page shows."""
VIEWER = "ui-usage-viewer"
VIEWER_PASSWORD = "usage-viewer-1"


def daily_hours(url: str) -> dict[str, float]:
    """Slot-hours by day (``YYYY-MM-DD``) over the page's window, as the API serves them."""
    today = dt.datetime.now(dt.UTC).date()
    answer = httpx.get(
        f"{url}/api/v1/resources/allocation/aggregated",
        params={
            "startDate": (today - dt.timedelta(days=DAYS - 1)).isoformat(),
            "endDate": today.isoformat(),
            "period": "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY",
        },
        headers=admin_headers(url),
    )
    assert answer.status_code == 200, answer.text
    return {
        e["periodStart"]: e["seconds"] / 3600
        for e in answer.json()["resourceEntries"]
        if e["seconds"] > 0
    }


def test_cluster_usage_over_time(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """Every day with usage is listed with the API's slot-hours (read before and after the page,
    since a running task keeps adding), the chart covers 30 days and says its unit."""
    from playwright.sync_api import expect

    before = daily_hours(cluster.url)
    assert before, "the ASHA search held slots today"
    sign_in(page, cluster.url)
    page.locator("#nav-cluster").click()
    chart = page.locator("#usage .uplot")
    expect(chart).to_have_attribute("data-days", str(DAYS))
    expect(chart).to_have_attribute(
        "aria-label", re.compile(rf"^Slot-hours allocated per day, last {DAYS} days: .* slot-hours")
    )
    rows = page.locator("#usage-table tr[data-day]")
    expect(rows.first).to_be_attached()
    after = daily_hours(cluster.url)
    shown = {
        str(row.get_attribute("data-day")): float(row.get_attribute("data-slot-hours") or "nan")
        for row in rows.all()
    }
    assert set(before) <= set(shown) <= set(after)
    for day, hours in shown.items():
        assert before.get(day, 0) - 1e-9 <= hours <= after[day] + 1e-9, (day, hours)
    total = float(chart.get_attribute("data-total") or "nan")
    assert abs(total - sum(shown.values())) < 1e-6
    page.locator("#usage-days summary").click()
    expect(rows.first).to_be_visible()
    page.screenshot(path=str(artifacts / "53-cluster-usage.png"), full_page=True)


def test_usage_is_for_admins(page: Page, cluster: LocalCluster) -> None:
    from playwright.sync_api import expect

    made = httpx.post(
        f"{cluster.url}/api/v1/users",
        json={"user": {"username": VIEWER, "active": True}, "password": VIEWER_PASSWORD},
        headers=admin_headers(cluster.url),
    )
    assert made.status_code == 200, made.text
    sign_in_as(page, cluster.url, VIEWER, VIEWER_PASSWORD)
    page.locator("#nav-cluster").click()
    expect(page.locator("#usage-refused")).to_have_text(
        "Usage over time is shown to administrators."
    )
    expect(page.locator("#pools tbody tr").first).to_be_visible()
