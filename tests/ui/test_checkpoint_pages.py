"""The checkpoints tables of the trial and experiment pages page through more than 100
checkpoints against a real master (no agent): 130 checkpoints reported through the API for one
trial of a search that never runs.

The trial page shows the newest 100 by batches with "1-100 of 130 checkpoints (page 1 of 2)",
Next shows the other 30, a checkpoint deleted there leaves 129 (checked through the API), and
"Show deleted" goes back to the first page with the deleted one counted; the experiment page
pages the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stalwart.client import Client
from tests.ui.conftest import admin_headers, master_with_user, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHECKPOINTS = 130


def api(url: str, method: str, path: str, body: Any = None) -> Any:
    """Call the API as admin; the parsed answer (any status but 200 fails)."""
    answer = httpx.request(method, f"{url}/api/v1{path}", json=body, headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    return answer.json()


def uuid_of(steps: int) -> str:
    """The UUID of the checkpoint at ``steps`` batches (its first 8 characters name it)."""
    return f"{steps:08d}-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int]]:
    """A master without agents, an experiment of one trial (never run) whose task reported
    ``CHECKPOINTS`` checkpoints (batches 1..130); (address, experiment id, trial id)."""
    home = tmp_path_factory.mktemp("ui-checkpoints")
    with master_with_user(home, "ui-ckpt-viewer", "viewer-pass-1") as url:
        context = home / "context"
        context.mkdir()
        (context / "train.py").write_text("print('never runs: this master has no agent')\n")
        config = {
            "name": "ui-many-checkpoints",
            "entrypoint": "python3 train.py",
            "hyperparameters": {"lr": 0.1},
            "searcher": {"name": "random", "metric": "loss", "max_trials": 1},
        }
        with Client(url, "admin", "", config_dir=home / "client", environ={}) as admin:
            exp = admin.create_experiment(config, context)
            deadline = time.monotonic() + 60
            while not (trials := exp.trials()):
                assert time.monotonic() < deadline, "the trial was not created"
                time.sleep(0.2)
        trial_id = trials[0].id
        task_id = api(url, "GET", f"/trials/{trial_id}")["trial"]["taskId"]
        for steps in range(1, CHECKPOINTS + 1):
            api(
                url,
                "POST",
                "/checkpoints",
                {
                    "uuid": uuid_of(steps),
                    "state": "STATE_COMPLETED",
                    "metadata": {"steps_completed": steps},
                    "resources": {"model.pt": 1000},
                    "taskId": task_id,
                    "reportTime": f"2025-01-01T00:{steps // 60:02d}:{steps % 60:02d}Z",
                },
            )
        yield url, exp.id, trial_id


def test_the_checkpoints_tables_page_beyond_100(
    page: Page, seeded: tuple[str, int, int], artifacts: Path
) -> None:
    """100 a page with the total, Previous / Next, a deletion on the last page and "Show
    deleted" counted, on the trial's and the experiment's pages."""
    from playwright.sync_api import expect

    url, experiment_id, trial_id = seeded
    sign_in(page, url)
    page.goto(f"{url}/#/trials/{trial_id}")
    rows = page.locator("#checkpoints tbody tr")
    batches = page.locator("#checkpoints tbody tr td:nth-child(2)")
    shown = page.locator("#checkpoints-range")
    expect(shown).to_have_text("1\u2013100 of 130 checkpoints (page 1 of 2)")
    expect(rows).to_have_count(100)
    expect(batches.first).to_have_text("130")
    expect(batches.last).to_have_text("31")
    expect(page.get_by_role("button", name="Previous page of checkpoints")).to_be_disabled()
    page.get_by_role("button", name="Next page of checkpoints").click()
    expect(shown).to_have_text("101\u2013130 of 130 checkpoints (page 2 of 2)")
    expect(rows).to_have_count(30)
    expect(batches.first).to_have_text("30")
    expect(batches.last).to_have_text("1")
    expect(page.get_by_role("button", name="Next page of checkpoints")).to_be_disabled()
    page.screenshot(path=str(artifacts / "94-checkpoints-page-2.png"), full_page=True)

    # delete one on page 2: 129 left, still on page 2
    uuid = uuid_of(1)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete checkpoint {uuid[:8]}").click()
    expect(shown).to_have_text("101\u2013129 of 129 checkpoints (page 2 of 2)")
    expect(batches.last).to_have_text("2")
    held = api(url, "GET", f"/trials/{trial_id}/checkpoints?limit=1")["pagination"]
    assert held["total"] == 130  # no state filter: the deleted one is still listed
    assert api(url, "GET", f"/checkpoints/{uuid}")["checkpoint"]["state"] in (
        "STATE_DELETED",
        "STATE_PARTIALLY_DELETED",
    )

    # showing deleted ones starts again at page 1 and counts it
    page.get_by_label("Show deleted checkpoints").check()
    expect(shown).to_have_text("1\u2013100 of 130 checkpoints (page 1 of 2)")
    expect(page.get_by_role("button", name="Previous page of checkpoints")).to_be_disabled()

    # the experiment's table pages the same way
    page.goto(f"{url}/#/experiments/{experiment_id}")
    page.get_by_role("link", name="Checkpoints", exact=True).click()
    expect(shown).to_have_text("1\u2013100 of 129 checkpoints (page 1 of 2)")
    expect(rows).to_have_count(100)
    page.get_by_role("button", name="Next page of checkpoints").click()
    expect(shown).to_have_text("101\u2013129 of 129 checkpoints (page 2 of 2)")
    expect(rows).to_have_count(29)
