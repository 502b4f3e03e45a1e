"""Charts stay responsive with 100 trials of long series: the master downsamples every served
series (bounded however many points were reported) and the page draws 100 lines quickly.

The data (``big`` in conftest) is seeded through ``POST /api/v1/trials/metrics/batch``: two trials
of 10,000 points and 98 of ``STALWART_UI_BIG_POINTS`` (1,000 by default; 10,000 for the full
100 x 10,000)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from tests.ui.conftest import BIG_TRIALS, BigSearch, admin_headers, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

PAGE_POINTS = 200
"""What the experiment page asks per trial when it shows 100 trials (`pointsPerTrial` in
ui/src/pages/Experiment.tsx)."""
RENDER_BOUND_S = 60.0
"""A generous bound for a first draw of 100 x 200 points (the master reads every report once;
later polls hit its cache)."""


def test_served_series_are_bounded(big: BigSearch) -> None:
    """The experiment series keeps at most maxPoints per trial whatever was reported, counts
    every point, keeps each series' first and last step, and a second read is from the cache."""
    headers = admin_headers(big.url)
    url = f"{big.url}/api/v1/ui/experiments/{big.experiment_id}/series"
    params: dict[str, str | int] = {"metric": "loss", "group": "training", "maxPoints": PAGE_POINTS}
    started = time.monotonic()
    first = httpx.get(url, params=params, headers=headers, timeout=120).json()
    cold = time.monotonic() - started
    started = time.monotonic()
    again = httpx.get(url, params=params, headers=headers, timeout=120).json()
    warm = time.monotonic() - started
    print(f"\nexperiment series: {cold:.2f} s cold, {warm:.2f} s cached")
    assert again == first
    assert len(first["trials"]) == BIG_TRIALS
    for series in first["trials"]:
        reported = big.points[series["trialId"]]
        assert series["total"] == reported
        assert len(series["batches"]) == min(PAGE_POINTS, reported)
        assert series["batches"][0] == 1
        assert series["batches"][-1] == reported
    assert warm < cold

    longest = max(big.points, key=lambda t: big.points[t])
    one = httpx.get(
        f"{big.url}/api/v1/ui/trials/{longest}/series",
        params={"group": "training", "maxPoints": 1000},
        headers=headers,
        timeout=120,
    ).json()
    (loss,) = one["series"]
    assert loss["metric"] == "loss"
    assert loss["total"] == 10_000
    assert len(loss["batches"]) == 1000
    assert loss["batches"][-1] == 10_000


def test_experiment_page_draws_100_trials(page: Page, big: BigSearch, artifacts: Path) -> None:
    """The experiment page draws a line per trial, each holding what the master served, within
    a sane bound."""
    from playwright.sync_api import expect

    sign_in(page, big.url)
    started = time.monotonic()
    page.goto(f"{big.url}/#/experiments/{big.experiment_id}?group=training&metric=loss")
    paths = page.locator("#chart li.series")
    expect(paths).to_have_count(BIG_TRIALS, timeout=RENDER_BOUND_S * 1000)
    elapsed = time.monotonic() - started
    print(f"\n100 trials drawn in {elapsed:.1f} s (seeded in {big.seed_seconds:.1f} s)")
    assert elapsed < RENDER_BOUND_S
    served = httpx.get(
        f"{big.url}/api/v1/ui/experiments/{big.experiment_id}/series",
        params={"metric": "loss", "group": "training", "maxPoints": PAGE_POINTS},
        headers=admin_headers(big.url),
        timeout=120,
    ).json()
    drawn = {
        int(str(p.get_attribute("data-trial-id"))): int(str(p.get_attribute("data-points")))
        for p in paths.all()
    }
    assert drawn == {s["trialId"]: len(s["batches"]) for s in served["trials"]}
    assert max(drawn.values()) <= PAGE_POINTS
    held = {
        int(str(p.get_attribute("data-trial-id"))): int(str(p.get_attribute("data-drawn")))
        for p in paths.all()
    }
    assert held == drawn  # what uPlot holds, read back after drawing
    # Hovering stays quick: a move over the chart answers with a tooltip.
    box = page.locator("#chart .u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.5)
    page.mouse.move(box["x"] + 70, box["y"] + 20)
    page.screenshot(path=artifacts / "13-experiment-100-trials.png", full_page=True)
