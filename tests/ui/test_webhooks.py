"""The Webhooks page (#/webhooks) against a real master: create a webhook with a state and a log
trigger from the form, see it listed (type, scope, triggers, URL), Test it against a real
receiver on loopback (the signed test event arrives), see a refused form's reason, and Delete
it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stalwart.client import Client
from stalwart.local import LocalCluster
from tests.ui.conftest import sign_in
from tests.ui.test_pages import CONTRAST
from tests.webhook_receiver import Receiver, receiver

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture
def hooks() -> Iterator[Receiver]:
    with receiver() as found:
        yield found


def test_the_webhooks_page(
    page: Page, cluster: LocalCluster, client: Client, hooks: Receiver, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.get_by_role("link", name="Webhooks", exact=True).click()
    expect(page.get_by_role("heading", name="Webhooks", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Webhooks", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    before = {w.id for w in client.list_webhooks()}

    # a refused form says why, in the page
    page.get_by_label("URL").fill("not a url")
    page.get_by_role("button", name="Create webhook").click()
    expect(page.locator("#webhook-error")).to_contain_text("valid url required")

    # create: a JSON webhook on COMPLETED and ERROR and a log regex, global
    page.get_by_label("URL").fill(hooks.url("ui"))
    page.get_by_label("Name", exact=True).fill("ui-hook")
    page.get_by_label("Log regex").fill("Traceback")
    page.get_by_role("button", name="Create webhook").click()
    expect(page.locator("#toast")).to_contain_text("Created webhook")  # the answer came
    expect(page.locator("#webhook-error")).to_have_text("")
    (made,) = [w for w in client.list_webhooks() if w.id not in before]
    assert [(t.trigger_type, t.condition) for t in made.triggers] == [
        ("EXPERIMENT_STATE_CHANGE", "state=COMPLETED"),
        ("EXPERIMENT_STATE_CHANGE", "state=ERROR"),
        ("TASK_LOG", "regex=Traceback"),
    ]
    row = page.locator(f'#webhooks tr[data-key="{made.id}"]')
    expect(row.locator("td").nth(1)).to_have_text("ui-hook")
    expect(row.locator("td").nth(2)).to_have_text("JSON")
    expect(row.locator("td").nth(3)).to_have_text("global")
    expect(row.locator("td").nth(4)).to_have_text("state COMPLETED, state ERROR, log /Traceback/")
    expect(row.locator("td").nth(5)).to_have_text(hooks.url("ui"))
    page.screenshot(path=str(artifacts / "20-webhooks.png"), full_page=True)
    for _ in range(2):  # text keeps a contrast of at least 4.5:1 in both themes
        ratios: dict[str, float] = page.evaluate(CONTRAST)
        theme = page.evaluate("document.documentElement.dataset.theme")
        for selector, ratio in ratios.items():
            assert ratio >= 4.5, f"{selector} has contrast {ratio:.2f} in the {theme} theme"
        page.locator("#theme-toggle").click()

    # test: the receiver gets the signed test event
    row.get_by_role("button", name=f"Test webhook {made.id} (ui-hook)").click()
    (post,) = hooks.wait("ui")
    assert json.loads(post.body)["event_data"] == {"data": "test"}
    assert "X-Determined-AI-Signature" in post.headers
    expect(page.locator("#toast")).to_contain_text("took the test event")

    # delete, after confirming
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=f"Delete webhook {made.id} (ui-hook)").click()
    expect(row).to_have_count(0)
    assert made.id not in {w.id for w in client.list_webhooks()}
