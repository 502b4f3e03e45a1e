"""The Tasks page (#/tasks) against a real master and agent: commands and a notebook launched
with the SDK are listed (kind, description, owner, state, start time, exit status), a command's
logs show in the page, a notebook's Open link is its serviceAddress and answers, the kind
filter is kept in the hash, and Kill stops a running command; the page's form launches a
notebook with a config template picked from the user's templates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from stalwart.client import Client, InteractiveTask
from stalwart.local import LocalCluster
from tests.ui.conftest import admin_headers, sign_in
from tests.ui.test_pages import CONTRAST

if TYPE_CHECKING:
    from playwright.sync_api import Page

WAIT_S = 120.0
NO_SLOTS = {"resources": {"slots": 0}}


@pytest.fixture(scope="module")
def tasks(client: Client) -> Iterator[dict[str, InteractiveTask]]:
    """A finished command, a running command and a ready notebook."""
    done = client.launch_command(
        "echo hello from the tasks page", {"description": "finished command", **NO_SLOTS}
    )
    sleeper = client.launch_command(["sleep", "600"], {"description": "sleeper", **NO_SLOTS})
    notebook = client.launch_notebook({"description": "ui notebook", **NO_SLOTS})
    done.wait(timeout=WAIT_S, interval=0.2)
    sleeper.wait_ready(timeout=WAIT_S, interval=0.2)
    notebook.wait_ready(timeout=WAIT_S, interval=0.2)
    try:
        yield {"done": done, "sleeper": sleeper, "notebook": notebook}
    finally:
        for task in (sleeper, notebook):
            if not task.reload().ended:
                task.kill()


def test_the_tasks_page(
    page: Page,
    cluster: LocalCluster,
    tasks: dict[str, InteractiveTask],
    artifacts: Path,
) -> None:
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.get_by_role("link", name="Tasks", exact=True).click()
    expect(page.get_by_role("heading", name="Tasks", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Tasks", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    done, sleeper, notebook = tasks["done"], tasks["sleeper"], tasks["notebook"]
    row = page.locator(f'#tasks tr[data-key="{done.id}"]')
    expect(row.locator("td").nth(0)).to_have_text("Command")
    expect(row.locator("td").nth(2)).to_have_text("finished command")
    expect(row.locator("td").nth(3)).to_have_text("admin")
    expect(row.locator("td").nth(4)).to_have_text("TERMINATED")
    expect(row.locator("td").nth(5)).not_to_have_text("\u2013")  # a start time, not the dash
    expect(row.locator("td").nth(6)).to_have_text("exited with code 0")
    expect(row.get_by_role("link", name=f"Open command {done.id}")).to_be_hidden()
    expect(row.get_by_role("button", name=f"Kill command {done.id}")).to_be_disabled()

    # logs: the command's line, in the page and in the hash
    row.get_by_role("button", name=f"Logs of command {done.id}").click()
    expect(page.get_by_role("log", name=f"Logs of command {done.id}")).to_contain_text(
        "hello from the tasks page"
    )
    expect(page.locator("#task-log-status")).to_contain_text("the task has ended")
    assert f"logs={done.id}" in page.url
    page.screenshot(path=str(artifacts / "12-tasks.png"), full_page=True)
    for _ in range(2):  # text keeps a contrast of at least 4.5:1 in both themes
        ratios: dict[str, float] = page.evaluate(CONTRAST)
        theme = page.evaluate("document.documentElement.dataset.theme")
        for selector, ratio in ratios.items():
            assert ratio >= 4.5, f"{selector} has contrast {ratio:.2f} in the {theme} theme"
        page.locator("#theme-toggle").click()

    # the notebook: Open is its serviceAddress, which answers; the session cookie passes the
    # proxy too (a TensorBoard's Open relies on it)
    nb_row = page.locator(f'#tasks tr[data-key="{notebook.id}"]')
    expect(nb_row.locator("td").nth(4)).to_have_text("RUNNING")
    link = nb_row.get_by_role("link", name=f"Open notebook {notebook.id}")
    expect(link).to_have_attribute("href", notebook.data.service_address or "")
    expect(link).to_have_attribute("target", "_blank")
    answer = httpx.get(f"{cluster.url}{notebook.data.service_address}", timeout=30)
    assert answer.status_code in (200, 302), answer.text
    path = f"{cluster.url}/proxy/{notebook.id}/api/status"
    assert httpx.get(path, timeout=30).status_code == 401  # no session: the master refuses
    passed = page.request.get(path)  # the tab's cookie: the master lets it through
    assert passed.status != 401, passed.text()
    assert "reason" in passed.json()  # JupyterLab's own answer (it wants its token)

    # the kind filter, kept in the hash
    page.get_by_label("Kind").select_option("notebook")
    expect(page.locator("#tasks tbody tr")).to_have_count(1)
    assert re.search(r"kind=notebook", page.url)
    page.reload()
    expect(page.locator("#tasks tbody tr")).to_have_count(1)
    expect(page.get_by_label("Kind")).to_have_value("notebook")
    page.get_by_label("Kind").select_option("")

    # kill the sleeping command
    sleeper_row = page.locator(f'#tasks tr[data-key="{sleeper.id}"]')
    expect(sleeper_row.locator("td").nth(4)).to_have_text("RUNNING")
    page.once("dialog", lambda dialog: dialog.accept())
    sleeper_row.get_by_role("button", name=f"Kill command {sleeper.id}").click()
    expect(sleeper_row.locator("td").nth(4)).to_have_text("TERMINATED", timeout=60_000)
    expect(sleeper_row.locator("td").nth(6)).not_to_have_text("exited with code 0")
    assert sleeper.reload().ended


def test_launching_a_notebook(
    page: Page, cluster: LocalCluster, client: Client, artifacts: Path
) -> None:
    """The Tasks page's form launches a JupyterLab notebook (0 slots: CPU only) as `det notebook
    start` does, with the config template picked from the templates the user may read: it is
    listed with the template's description, carries the template's settings, becomes ready with
    an Open link, and is killed from its row; a template deleted after it was picked is refused
    with the master's reason and leaves the picker."""
    from playwright.sync_api import expect

    headers = admin_headers(cluster.url)
    made = {
        "ui-nb": {
            "description": "notebook from the ui-nb template",
            "environment": {"environment_variables": ["UI_TEMPLATE=ui-nb"]},
        },
        "ui-nb-gone": {"description": "soon deleted"},
    }
    for name, config in made.items():
        answer = httpx.put(
            f"{cluster.url}/api/v1/templates/{name}", json={"config": config}, headers=headers
        )
        assert answer.status_code == 200, answer.text

    sign_in(page, cluster.url)
    page.get_by_role("link", name="Tasks", exact=True).click()
    before = {t.id for t in client.list_interactive("notebook")}
    picker = page.get_by_label("Template")
    expect(picker.locator("option")).to_contain_text(
        ["none", "ui-nb (workspace 1)", "ui-nb-gone (workspace 1)"]
    )
    expect(picker).to_have_value("")

    # a template deleted behind the page's back: the master's reason, and the picker forgets it
    picker.select_option("ui-nb-gone")
    gone = httpx.delete(f"{cluster.url}/api/v1/templates/ui-nb-gone", headers=headers)
    assert gone.status_code == 200, gone.text
    page.get_by_role("button", name="Launch notebook").click()
    expect(page.locator("#notebook-error")).to_have_text(
        "Could not launch the notebook: template 'ui-nb-gone' not found"
    )
    expect(picker.locator('option[value="ui-nb-gone"]')).to_have_count(0)
    expect(picker).to_have_value("")
    assert {t.id for t in client.list_interactive("notebook")} == before

    # launched with the template: its description (the form's is empty) and its settings
    picker.select_option("ui-nb")
    expect(page.get_by_label("Slots")).to_have_value("0")
    page.get_by_role("button", name="Launch notebook").click()
    expect(page.locator("#toast")).to_contain_text("Launched notebook")
    expect(page.locator("#notebook-error")).to_have_text("")
    (launched,) = [t for t in client.list_interactive("notebook") if t.id not in before]
    assert launched.description == "notebook from the ui-nb template"
    stored = httpx.get(f"{cluster.url}/api/v1/notebooks/{launched.id}", headers=headers)
    assert stored.status_code == 200, stored.text
    variables = stored.json()["config"]["environment"]["environment_variables"]
    assert "UI_TEMPLATE=ui-nb" in str(variables), variables
    row = page.locator(f'#tasks tr[data-key="{launched.id}"]')
    expect(row.locator("td").nth(0)).to_have_text("Notebook")
    expect(row.locator("td").nth(2)).to_have_text("notebook from the ui-nb template")
    expect(row.locator("td").nth(4)).to_have_text("RUNNING", timeout=WAIT_S * 1000)
    launched.wait_ready(timeout=WAIT_S, interval=0.2)
    link = row.get_by_role("link", name=f"Open notebook {launched.id}")
    expect(link).to_have_attribute("href", launched.reload().data.service_address or "")
    page.screenshot(path=str(artifacts / "41-tasks-notebook-launched.png"), full_page=True)

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=f"Kill notebook {launched.id}").click()
    expect(row.locator("td").nth(4)).to_have_text("TERMINATED", timeout=60_000)
