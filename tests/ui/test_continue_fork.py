"""The experiment page's Continue and Fork against a real master and agent.

A finished single-trial experiment (the Core API checkpoints example) is continued from the
page with a longer ``searcher.max_length``: a change the master refuses (its project) shows
its reason in the dialog, the accepted one says the experiment runs again, which it does to
COMPLETED with the new config. Continue is disabled, with the reason shown, for a multi-trial
search and for a paused experiment. Fork opens the config named "Fork of ...", creates the edited
experiment (which runs the parent's model definition to COMPLETED) and opens its page; a config
the master refuses shows its reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
import yaml

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.examples.conftest import completed, example_config
from tests.ui.conftest import CORE_API, admin_headers, settled_width, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

CONTINUED_LENGTH = 150
"""The ``searcher.max_length.batches`` the test continues with (the example stops at 100)."""


@pytest.fixture(scope="module")
def single(client: Client) -> Experiment:
    """A completed single-trial experiment with checkpoints."""
    config = example_config(
        CORE_API / "2_checkpoints.yaml",
        {"name": "ui-continue", "searcher.max_length": {"batches": 100}},
    )
    exp = client.create_experiment(config, CORE_API)
    completed(exp, timeout=180)
    return exp.reload()


def _experiment(url: str, exp_id: int) -> dict[str, object]:
    answer = httpx.get(f"{url}/api/v1/experiments/{exp_id}", headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    found: dict[str, object] = answer.json()["experiment"]
    return found


def test_continue_a_finished_experiment(
    page: Page, cluster: LocalCluster, client: Client, single: Experiment, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{single.id}")
    expect(page.locator("#summary dd[data-field='State']")).to_have_text("COMPLETED")
    expect(page.locator("#continue-reason")).to_have_count(0)
    page.locator("#continue-open").click()
    dialog = page.locator("#continue-dialog")
    expect(dialog).to_be_visible()
    text = dialog.get_by_label("Override config (YAML)")
    expect(text).to_have_value("searcher:\n  max_length:\n    batches: 100\n")

    # A change the master refuses: its reason, in the dialog, and nothing changes.
    text.fill("project: elsewhere\n")
    dialog.get_by_role("button", name="Continue").click()
    expect(dialog.locator("#continue-error")).to_contain_text(
        f"Could not continue experiment {single.id}: 'project' cannot be set in the override "
        "config: use `det experiment move` first"
    )
    assert _experiment(cluster.url, single.id)["state"] == "STATE_COMPLETED"

    text.fill(f"searcher:\n  max_length:\n    batches: {CONTINUED_LENGTH}\n")
    dialog.get_by_role("button", name="Continue").click()
    expect(page.locator("#toast")).to_contain_text(f"Continued experiment {single.id} (now ")
    expect(dialog).to_be_hidden()
    page.screenshot(path=str(artifacts / "64-experiment-continued.png"), full_page=True)
    again = client.get_experiment(single.id)
    completed(again, timeout=180)
    config = again.reload().config
    assert config["searcher"]["max_length"] == {"batches": CONTINUED_LENGTH}
    # The page polls again after Continue and sees it end again.
    expect(page.locator("#summary dd[data-field='State']")).to_have_text(
        "COMPLETED", timeout=30_000
    )


def test_continue_is_disabled_with_the_reason(
    page: Page, cluster: LocalCluster, asha: Experiment, single: Experiment, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#continue-open")).to_be_disabled()
    expect(page.locator("#continue-reason")).to_have_text(
        "Continue: Its searcher is adaptive_asha: only a single-trial experiment can be "
        "continued (fork it instead)."
    )
    expect(page.locator("#fork-open")).to_be_enabled()
    # On a phone the actions wrap and the reason takes its own line: no sideways scrolling.
    page.set_viewport_size({"width": 390, "height": 900})
    expect(page.locator("#continue-reason")).to_be_visible()
    width = settled_width(page, 390)
    assert width <= 390, f"the experiment page is {width} px wide"
    page.set_viewport_size({"width": 1400, "height": 1000})

    # A paused experiment (a fork created without activating it) cannot be continued either.
    paused = httpx.post(
        f"{cluster.url}/api/v1/experiments",
        json={"config": _yaml(single, "ui-paused-fork"), "parentId": single.id, "activate": False},
        headers=admin_headers(cluster.url),
    )
    assert paused.status_code == 200, paused.text
    paused_id = paused.json()["experiment"]["id"]
    page.goto(f"{cluster.url}/#/experiments/{paused_id}")
    expect(page.locator("#continue-open")).to_be_disabled()
    expect(page.locator("#continue-reason")).to_contain_text(
        "It is PAUSED: only a finished experiment (completed, canceled or errored) can be "
        "continued; wait for it to end, or kill it."
    )
    page.screenshot(path=str(artifacts / "65-experiment-continue-disabled.png"), full_page=True)
    httpx.post(
        f"{cluster.url}/api/v1/experiments/{paused_id}/kill", headers=admin_headers(cluster.url)
    ).raise_for_status()


def _yaml(exp: Experiment, name: str) -> str:
    """``exp``'s config as YAML, named ``name``."""
    return yaml.safe_dump({**exp.config, "name": name})


def test_fork_an_experiment(
    page: Page, cluster: LocalCluster, client: Client, single: Experiment, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{single.id}")
    page.locator("#fork-open").click()
    dialog = page.locator("#fork-dialog")
    text = dialog.get_by_label("Config (YAML)")
    expect(text).to_have_value(re.compile(r"^name: Fork of ui-continue$", re.MULTILINE))

    # A config the master refuses: its reason in the dialog.
    text.fill("name: broken\nentrypoint: python3 2_checkpoints.py\nsearcher:\n  name: nonsense\n")
    dialog.get_by_role("button", name="Create experiment").click()
    expect(dialog.locator("#fork-error")).to_contain_text(
        f"Could not fork experiment {single.id}: "
    )
    expect(dialog).to_be_visible()

    text.fill(_yaml(single, "ui-forked"))
    page.screenshot(path=str(artifacts / "66-experiment-fork-dialog.png"), full_page=True)
    dialog.get_by_role("button", name="Create experiment").click()
    page.wait_for_url(
        lambda url: (
            re.search(r"#/experiments/\d+$", url) is not None
            and not url.endswith(f"#/experiments/{single.id}")
        )
    )
    fork_id = int(page.url.rsplit("/", 1)[1])
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Experiment {fork_id}: ui-forked")
    expect(page.locator("#summary dd[data-field='Forked from']")).to_have_text(
        f"experiment {single.id}"
    )
    wire = _experiment(cluster.url, fork_id)
    assert wire["forkedFrom"] == single.id
    assert wire["projectId"] == _experiment(cluster.url, single.id)["projectId"]
    completed(client.get_experiment(fork_id), timeout=180)
    expect(page.locator("#summary dd[data-field='State']")).to_have_text(
        "COMPLETED", timeout=30_000
    )
    page.screenshot(path=str(artifacts / "67-experiment-forked.png"), full_page=True)
