"""When the master cannot be reached, every page says so once (a banner, not a toast per poll)
and recovers by itself once it answers again (Debian's chromium, a real master)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stalwart.local import LocalCluster
from tests.ui.conftest import sign_in

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.sync_api import Page


def test_an_unreachable_master_shows_a_banner_until_it_answers(
    page: Page, cluster: LocalCluster, artifacts: Path
) -> None:
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments")
    page.wait_for_selector("#experiments-count", timeout=30_000)
    assert page.locator("#offline-banner").count() == 0
    page.context.set_offline(True)
    page.locator("#nav-cluster").click()  # a page that asks the master at once
    banner = page.locator("#offline-banner")
    banner.wait_for(state="visible", timeout=30_000)
    assert "Cannot reach the Stalwart master" in banner.inner_text()
    assert banner.get_attribute("role") == "status"  # read out by screen readers
    page.screenshot(path=str(artifacts / "54-offline.png"), full_page=True)
    assert "Error:" not in page.locator("#toast").inner_text()  # no toast per failed poll
    page.context.set_offline(False)
    banner.wait_for(state="detached", timeout=30_000)  # the next poll's answer clears it
