"""The uPlot charts in a real browser: one stable colour per trial on every chart (learning
curves of any metric and the scatter), charts that keep their shape and are drawn at the size
they are shown (390 px phone and 1400 px desktop viewports), drag to zoom, and cursors that move
together across a trial's charts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stalwart.client import Experiment
from stalwart.local import LocalCluster
from tests.ui.conftest import sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def colours(page: Page, selector: str) -> dict[int, str]:
    """``data-trial-id`` -> ``data-color`` of the elements under ``selector``."""
    return {
        int(str(node.get_attribute("data-trial-id"))): str(node.get_attribute("data-color"))
        for node in page.locator(selector).all()
    }


def test_one_colour_per_trial_on_every_chart(
    page: Page, cluster: LocalCluster, asha: Experiment
) -> None:
    """A trial's line has the same colour for every metric, its scatter point has that colour
    too, and no two trials share one."""
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#chart li.series")).to_have_count(4)
    expect(page.locator("#scatter button.point")).to_have_count(4)
    validation = colours(page, "#chart li.series")
    assert colours(page, "#scatter button.point") == validation
    assert len(set(validation.values())) == len(validation)
    page.get_by_label("Metrics", exact=True).select_option("training")
    page.get_by_label("Metric", exact=True).select_option("loss")
    expect(page.locator("#chart-title")).to_have_text("Learning curves: training loss")
    expect(page.locator("#chart li.series")).to_have_count(4)
    assert colours(page, "#chart li.series") == validation
    assert colours(page, "#scatter button.point") == validation
    # The swatch shows the line's colour.
    for trial_id, colour in validation.items():
        swatch = page.locator(f"#chart li.series[data-trial-id='{trial_id}'] .swatch")
        shown = swatch.evaluate("(s) => getComputedStyle(s).backgroundColor")
        expected = page.evaluate(
            "(c) => { const d = document.createElement('i'); d.style.color = c;"
            " document.body.append(d); const v = getComputedStyle(d).color; d.remove();"
            " return v; }",
            colour,
        )
        assert shown == expected


def test_the_curves_do_not_wait_for_the_trials_list(
    page: Page, cluster: LocalCluster, asha: Experiment
) -> None:
    """The experiment page asks for its trials beside the experiment and draws the learning
    curves (the series) while the trials list is still unanswered; the scatter, which needs
    the trials' hyperparameters, and the Trials tab fill in once it answers."""
    from playwright.sync_api import Route, expect

    held: list[Route] = []
    trials_list = re.compile(rf"/api/v1/experiments/{asha.id}/trials\?limit=")

    def hold(route: Route) -> None:
        held.append(route)  # answered only when the test lets it go

    sign_in(page, cluster.url)
    page.route(trials_list, hold)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#chart li.series")).to_have_count(4)
    assert len(held) == 1  # asked, and still unanswered while the curves are drawn
    expect(page.locator("#scatter button.point")).to_have_count(0)
    page.locator("#experiment-tabs a[data-tab='trials']").click()
    expect(page.locator("#trials-loading")).to_be_visible()
    for route in held:
        route.continue_()
    expect(page.locator("#trials tbody tr")).to_have_count(4)
    expect(page.locator("#trials-loading")).to_have_count(0)
    page.locator("#experiment-tabs a[data-tab='overview']").click()
    expect(page.locator("#scatter button.point")).to_have_count(4)
    page.unroute(trials_list)


@pytest.fixture(params=[390, 1400], ids=["390px", "1400px"])
def sized(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    """A tab with a phone (390 px) or desktop (1400 px) viewport."""
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    width = int(request.param)
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_init_script("localStorage.setItem('stalwart.pollMs', '500')")
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    try:
        yield tab
    finally:
        context.close()


CANVAS = """(canvas) => {
    const box = canvas.getBoundingClientRect();
    return {left: box.left, right: box.right, width: box.width, height: box.height,
            pixelsWide: canvas.width, pixelsHigh: canvas.height, ratio: devicePixelRatio};
}"""


def test_charts_keep_their_shape(
    sized: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """At 390 px and 1400 px the learning curves fit the viewport, keep a sane aspect, and the
    canvas holds as many pixels as it shows (nothing is stretched: text and points keep their
    size); the scatter's points stay round."""
    from playwright.sync_api import expect

    page = sized
    viewport = page.viewport_size
    assert viewport is not None
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#chart li.series")).to_have_count(4)
    canvas = page.locator("#chart canvas")
    box = canvas.evaluate(CANVAS)
    assert box["left"] >= 0
    assert box["right"] <= viewport["width"]
    assert box["pixelsWide"] == round(box["width"] * box["ratio"])
    assert box["pixelsHigh"] == round(box["height"] * box["ratio"])
    assert 180 <= box["height"] <= 380
    assert 0.2 <= box["height"] / box["width"] <= 0.6
    point = page.locator("#scatter button.point").first.bounding_box()
    assert point is not None
    assert point["width"] == point["height"]
    width = viewport["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=artifacts / f"16-experiment-{width}px.png", full_page=True)


def test_zoom_by_dragging(page: Page, cluster: LocalCluster, asha: Experiment) -> None:
    """Dragging across the learning curves zooms the x axis to the dragged span; a double-click
    shows everything again."""
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}?group=training&metric=loss")
    expect(page.locator("#chart li.series")).to_have_count(4)
    root = page.locator("#chart .uplot")
    expect(root).to_have_attribute("data-x-max", re.compile(r"\d"))
    full = (
        float(str(root.get_attribute("data-x-min"))),
        float(str(root.get_attribute("data-x-max"))),
    )
    assert full[0] < full[1]
    over = page.locator("#chart .u-over").bounding_box()
    assert over is not None
    y = over["y"] + over["height"] / 2
    page.mouse.move(over["x"] + over["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(over["x"] + over["width"] * 0.5, y, steps=5)
    page.mouse.move(over["x"] + over["width"] * 0.6, y, steps=5)
    page.mouse.up()
    expect(root).not_to_have_attribute("data-x-max", str(full[1]))
    low, high = (
        float(str(root.get_attribute("data-x-min"))),
        float(str(root.get_attribute("data-x-max"))),
    )
    span = full[1] - full[0]
    assert full[0] < low < high < full[1]
    assert abs((high - low) - span * 0.3) <= span * 0.05
    page.mouse.dblclick(over["x"] + over["width"] / 2, y)
    expect(root).not_to_have_attribute("data-x-max", str(high))
    assert float(str(root.get_attribute("data-x-min"))) == pytest.approx(full[0])
    assert float(str(root.get_attribute("data-x-max"))) == pytest.approx(full[1])


def test_trial_charts_move_their_cursors_together(
    page: Page, cluster: LocalCluster, asha: Experiment
) -> None:
    """Hovering one chart of a trial page shows the cursor's values on its other charts too."""
    from playwright.sync_api import expect

    trial = min(asha.trials(), key=lambda t: t.id)
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/trials/{trial.id}")
    figures = page.locator("#metric-charts figure, #system-charts figure")
    expect(page.locator("#system-charts figure").first).to_be_visible()
    expect(page.locator("#metric-charts figure").first).to_be_visible()
    first = page.locator("#metric-charts figure").first
    over = first.locator(".u-over").bounding_box()
    assert over is not None
    page.mouse.move(over["x"] + over["width"] - 2, over["y"] + over["height"] / 2)
    expect(first.locator(".tooltip")).to_be_visible()
    others = figures.locator(".tooltip")
    expect(others.nth(1)).to_be_visible()
    # The system charts have units.
    expect(
        page.locator("#system-charts figure[data-key='cpu/cpu_util_simple'] figcaption")
    ).to_have_text("cpu: cpu_util_simple (%)")
