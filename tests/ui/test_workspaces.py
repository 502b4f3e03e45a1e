"""The Workspaces (#/workspaces), workspace (#/workspaces/ID) and project (#/projects/ID) pages,
and the experiment page's breadcrumbs, against a real master (no agent: the experiments here are
created paused and never run).

An admin creates a workspace from the form (pinned, as its creator), unpins and pins it, creates
a project in it, moves the project to another workspace, opens it (its experiments only, under
Workspaces / WORKSPACE / PROJECT), follows an experiment and its breadcrumbs back, and archives
and unarchives the workspace (archived ones shown on request). Unknown workspaces and projects
say so; a user without a role in a workspace neither sees it nor its projects, and is shown the
master's refusal when archiving a workspace they are only a member of.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stalwart.client import Client
from tests.ui.conftest import admin_headers, master_with_user, sign_in
from tests.ui.test_org import sign_in_as

if TYPE_CHECKING:
    from playwright.sync_api import Page

OUTSIDER = "ws-outsider"
OUTSIDER_PASSWORD = "outsider-pass-1"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real master without agents, with the outsider (a user with no role assignment); its
    address."""
    with master_with_user(
        tmp_path_factory.mktemp("ui-workspaces"), OUTSIDER, OUTSIDER_PASSWORD
    ) as url:
        yield url


@pytest.fixture(scope="module")
def admin(master: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """The Python SDK, logged in as admin."""
    with Client(
        master, "admin", "", config_dir=tmp_path_factory.mktemp("ws-client"), environ={}
    ) as client:
        yield client


def paused_experiment(admin: Client, tmp: Path, name: str, project_id: int) -> int:
    """An experiment created paused in ``project_id`` (it never runs: no agent); its id."""
    context = tmp / name
    context.mkdir()
    (context / "train.py").write_text("print('never runs')\n")
    config = {
        "name": name,
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    }
    return admin.create_experiment(config, context, activate=False, project_id=project_id).id


def api(master: str, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    """Call the API as admin; the parsed answer (any status but 200 fails)."""
    answer = httpx.request(
        method, f"{master}/api/v1{path}", json=body, headers=admin_headers(master), **kw
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_workspaces_projects_and_breadcrumbs(
    page: Page, master: str, admin: Client, tmp_path: Path, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    sign_in(page, master)
    page.get_by_role("link", name="Workspaces", exact=True).click()
    expect(page.get_by_role("heading", name="Workspaces", exact=True)).to_be_visible()
    expect(page.locator('#workspaces tr[data-key="1"] td').nth(1)).to_have_text("Uncategorized")
    expect(page.get_by_role("button", name="Archive workspace Uncategorized")).to_be_disabled()

    # create: listed, pinned for its creator
    page.get_by_label("Name", exact=True).fill("ui-team")
    page.get_by_role("button", name="Create workspace").click()
    expect(page.locator("#toast")).to_contain_text("Created workspace ui-team")
    (team,) = api(master, "GET", "/workspaces?name=ui-team")["workspaces"]
    assert team["pinned"] is True
    row = page.locator(f'#workspaces tr[data-key="{team["id"]}"]')
    expect(row).to_have_attribute("data-pinned", "true")
    expect(page.locator("#workspaces tbody tr").first).to_have_attribute("data-pinned", "true")
    row.get_by_role("button", name="Unpin workspace ui-team").click()
    expect(row).to_have_attribute("data-pinned", "false")
    assert api(master, "GET", f"/workspaces/{team['id']}")["workspace"]["pinned"] is False
    row.get_by_role("button", name="Pin workspace ui-team").click()
    expect(row).to_have_attribute("data-pinned", "true")
    page.screenshot(path=str(artifacts / "34-workspaces.png"), full_page=True)

    # the workspace page: empty, then a project made from the form
    row.get_by_role("link", name="ui-team").click()
    expect(page.get_by_role("heading", name="Workspace ui-team")).to_be_visible()
    expect(page.locator(".empty")).to_contain_text("No projects in this workspace yet")
    page.get_by_label("Name", exact=True).fill("ui-proj")
    page.get_by_label("Description").fill("the UI's project")
    page.get_by_role("button", name="Create project").click()
    expect(page.locator("#toast")).to_contain_text("Created project ui-proj")
    (proj,) = api(master, "GET", f"/workspaces/{team['id']}/projects")["projects"]
    assert (proj["name"], proj["description"]) == ("ui-proj", "the UI's project")
    expect(page.locator(f'#projects tr[data-key="{proj["id"]}"] td').nth(2)).to_have_text(
        "the UI's project"
    )

    # move it to another workspace
    other = api(master, "POST", "/workspaces", {"name": "ui-other"})["workspace"]
    page.get_by_label("Move project ui-proj to").select_option(label="ui-other")
    page.get_by_role("button", name="Move project ui-proj").click()
    expect(page.locator("#toast")).to_contain_text("Moved project ui-proj to workspace ui-other")
    expect(page.locator(f'#projects tr[data-key="{proj["id"]}"]')).to_have_count(0)
    assert api(master, "GET", f"/projects/{proj['id']}")["project"]["workspaceId"] == other["id"]

    # the project page: its experiments only, under breadcrumbs
    mine = paused_experiment(admin, tmp_path, "ui-in-project", proj["id"])
    elsewhere = paused_experiment(admin, tmp_path, "ui-elsewhere", 1)
    page.goto(f"{master}/#/projects/{proj['id']}")
    expect(page.get_by_role("heading", name="Project ui-proj")).to_be_visible()
    crumbs = page.get_by_role("navigation", name="Breadcrumbs")
    expect(crumbs).to_have_text("Workspacesui-otherui-proj")
    expect(page.locator(f'#experiments tr[data-key="{mine}"]')).to_be_visible()
    expect(page.locator("#experiments tbody tr")).to_have_count(1)
    expect(page.locator(f'#experiments tr[data-key="{elsewhere}"]')).to_have_count(0)
    page.screenshot(path=str(artifacts / "35-project.png"), full_page=True)

    # the experiment page names its workspace and project, and links back
    page.get_by_role("link", name="ui-in-project").click()
    expect(crumbs.get_by_role("link", name="ui-other")).to_have_attribute(
        "href", f"#/workspaces/{other['id']}"
    )
    expect(crumbs.locator('[aria-current="page"]')).to_have_text(
        f"Experiment {mine}: ui-in-project"
    )
    page.screenshot(path=str(artifacts / "36-experiment-breadcrumbs.png"), full_page=True)
    crumbs.get_by_role("link", name="ui-proj").click()
    expect(page.get_by_role("heading", name="Project ui-proj")).to_be_visible()

    # archive (after confirm): hidden unless archived ones are shown; unarchive
    page.get_by_role("link", name="Workspaces", exact=True).first.click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Archive workspace ui-team").click()
    expect(page.locator(f'#workspaces tr[data-key="{team["id"]}"]')).to_have_count(0)
    assert api(master, "GET", f"/workspaces/{team['id']}")["workspace"]["archived"] is True
    page.get_by_label("Show archived").check()
    expect(page).to_have_url(f"{master}/#/workspaces?archived=1")
    row = page.locator(f'#workspaces tr[data-key="{team["id"]}"]')
    expect(row.locator("td").nth(5)).to_have_text("archived")
    row.get_by_role("button", name="Unarchive workspace ui-team").click()
    expect(row.locator("td").nth(5)).to_have_text("active")
    assert api(master, "GET", f"/workspaces/{team['id']}")["workspace"]["archived"] is False

    # unknown ones say so
    page.goto(f"{master}/#/workspaces/99999")
    expect(page.locator("#workspace-missing")).to_contain_text("There is no workspace 99999")
    page.goto(f"{master}/#/projects/99999")
    expect(page.locator("#project-missing")).to_contain_text("There is no project 99999")


def test_a_user_without_a_role(page: Page, master: str, artifacts: Path) -> None:
    """The outsider sees neither a private workspace (default role none) nor its project, and
    is told why archiving a workspace they are only a member of is refused."""
    from playwright.sync_api import expect

    private = api(master, "POST", "/workspaces", {"name": "ui-private"})["workspace"]
    api(master, "PUT", f"/workspaces/{private['id']}/roles/default", {"role": "none"})
    hidden = api(master, "POST", f"/workspaces/{private['id']}/projects", {"name": "ui-hidden"})
    shared = api(master, "POST", "/workspaces", {"name": "ui-shared"})["workspace"]

    sign_in_as(page, master, OUTSIDER, OUTSIDER_PASSWORD)
    page.goto(f"{master}/#/workspaces")
    expect(page.locator(f'#workspaces tr[data-key="{shared["id"]}"]')).to_be_visible()
    expect(page.locator(f'#workspaces tr[data-key="{private["id"]}"]')).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Archive workspace ui-shared").click()
    expect(page.locator("#workspace-error")).to_contain_text(
        "Not allowed to archive workspace ui-shared"
    )
    page.screenshot(path=str(artifacts / "37-workspaces-forbidden.png"), full_page=True)
    assert api(master, "GET", f"/workspaces/{shared['id']}")["workspace"]["archived"] is False
    page.goto(f"{master}/#/workspaces/{private['id']}")
    expect(page.locator("#workspace-missing")).to_contain_text(
        f"There is no workspace {private['id']}"
    )
    page.goto(f"{master}/#/projects/{hidden['project']['id']}")
    expect(page.locator("#project-missing")).to_be_visible()
