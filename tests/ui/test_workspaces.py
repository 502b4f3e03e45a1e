"""The Workspaces (#/workspaces), workspace (#/workspaces/ID) and project (#/projects/ID) pages,
and the experiment page's breadcrumbs, against a real master (no agent: the experiments here are
created paused and never run).

An admin creates a workspace from the form (pinned, as its creator), unpins and pins it, creates
a project in it, moves the project to another workspace, opens it (its experiments only, under
Workspaces / WORKSPACE / PROJECT), follows an experiment and its breadcrumbs back, and archives
and unarchives the workspace (archived ones shown on request). Unknown workspaces and projects
say so; a user without a role in a workspace neither sees it nor its projects, and is shown the
master's refusal when archiving a workspace they are only a member of.

From their own pages: a workspace and a project renamed (the project described too), archived
and unarchived, refused deletion while they hold an experiment (the master's reason shown) and
deleted when empty (the page goes away); the workspace's role assignments listed, given to a
user and a group, taken, and its default role set, each checked through the API; a user with
only the default role sees the assignments but is told they may not change them, and is shown
the master's refusal on Delete; the workspace page fits a 390 px screen.
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


def workspace_roles(master: str, workspace_id: int) -> dict[str, Any]:
    """``GET /workspaces/ID/roles`` as admin."""
    answer: dict[str, Any] = api(master, "GET", f"/workspaces/{workspace_id}/roles")
    return answer


def test_a_workspace_and_a_project_edited_from_their_pages(
    page: Page, master: str, admin: Client, tmp_path: Path, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    ws = api(master, "POST", "/workspaces", {"name": "ui-edit"})["workspace"]
    full = api(master, "POST", f"/workspaces/{ws['id']}/projects", {"name": "ui-full"})["project"]
    empty = api(master, "POST", f"/workspaces/{ws['id']}/projects", {"name": "ui-empty"})["project"]
    paused_experiment(admin, tmp_path, "ui-held", full["id"])

    sign_in(page, master)
    page.goto(f"{master}/#/workspaces/{ws['id']}")
    expect(page.get_by_role("heading", name="Workspace ui-edit", exact=True)).to_be_visible()

    # rename the workspace
    page.locator("#workspace-actions").get_by_role("button", name="Rename").click()
    page.get_by_label("New name").fill("ui-edited")
    page.get_by_role("button", name="Save name").click()
    expect(page.locator("#toast")).to_contain_text("Renamed workspace ui-edit to ui-edited")
    expect(page.get_by_role("heading", name="Workspace ui-edited", exact=True)).to_be_visible()
    assert api(master, "GET", f"/workspaces/{ws['id']}")["workspace"]["name"] == "ui-edited"
    expect(page.locator("#workspace-rename")).to_have_count(0)

    # the project holding an experiment: renamed and described, archived and back, and its
    # deletion refused with the master's reason
    page.get_by_role("link", name="ui-full").click()
    expect(page.get_by_role("heading", name="Project ui-full")).to_be_visible()
    page.locator("#project-actions").get_by_role("button", name="Edit").click()
    page.get_by_label("Project name").fill("ui-renamed")
    page.get_by_label("Project description").fill("runs the UI keeps")
    page.get_by_role("button", name="Save project").click()
    expect(page.locator("#toast")).to_contain_text("Saved project ui-renamed")
    expect(page.get_by_role("heading", name="Project ui-renamed")).to_be_visible()
    expect(page.locator("#project-description")).to_have_text("runs the UI keeps")
    got = api(master, "GET", f"/projects/{full['id']}")["project"]
    assert (got["name"], got["description"]) == ("ui-renamed", "runs the UI keeps")
    crumbs = page.get_by_role("navigation", name="Breadcrumbs")
    expect(crumbs).to_have_text("Workspacesui-editedui-renamed")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#project-actions").get_by_role("button", name="Archive").click()
    expect(page.get_by_role("heading", name="Project ui-renamed (archived)")).to_be_visible()
    assert api(master, "GET", f"/projects/{full['id']}")["project"]["archived"] is True
    page.locator("#project-actions").get_by_role("button", name="Unarchive").click()
    expect(page.get_by_role("heading", name="Project ui-renamed", exact=True)).to_be_visible()
    assert api(master, "GET", f"/projects/{full['id']}")["project"]["archived"] is False

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#project-actions").get_by_role("button", name="Delete").click()
    expect(page.locator("#project-page-error")).to_contain_text(
        "Could not delete project ui-renamed: project 'ui-renamed' holds 1 experiment(s)"
    )
    expect(page).to_have_url(f"{master}/#/projects/{full['id']}")
    page.screenshot(path=str(artifacts / "80-project-delete-refused.png"), full_page=True)
    api(master, "GET", f"/projects/{full['id']}")

    # the empty project is deleted, and the page goes to its workspace
    page.goto(f"{master}/#/projects/{empty['id']}")
    expect(page.get_by_role("heading", name="Project ui-empty")).to_be_visible()
    dismissed: list[str] = []

    def dismiss(dialog: Any) -> None:
        dismissed.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)  # a dismissed confirmation deletes nothing
    page.locator("#project-actions").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Project ui-empty")).to_be_visible()
    assert dismissed == ["Delete project ui-empty? This cannot be undone."]
    api(master, "GET", f"/projects/{empty['id']}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#project-actions").get_by_role("button", name="Delete").click()
    expect(page.locator("#toast")).to_contain_text("Deleted project ui-empty")
    expect(page).to_have_url(f"{master}/#/workspaces/{ws['id']}")
    expect(page.locator(f'#projects tr[data-key="{full["id"]}"]')).to_be_visible()
    expect(page.locator(f'#projects tr[data-key="{empty["id"]}"]')).to_have_count(0)
    gone = httpx.get(f"{master}/api/v1/projects/{empty['id']}", headers=admin_headers(master))
    assert gone.status_code == 404

    # the workspace: archived and back; its deletion refused while it holds the experiment
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#workspace-actions").get_by_role("button", name="Archive").click()
    expect(page.get_by_role("heading", name="Workspace ui-edited (archived)")).to_be_visible()
    assert api(master, "GET", f"/workspaces/{ws['id']}")["workspace"]["archived"] is True
    page.locator("#workspace-actions").get_by_role("button", name="Unarchive").click()
    expect(page.get_by_role("heading", name="Workspace ui-edited", exact=True)).to_be_visible()
    assert api(master, "GET", f"/workspaces/{ws['id']}")["workspace"]["archived"] is False
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#workspace-actions").get_by_role("button", name="Delete").click()
    expect(page.locator("#workspace-page-error")).to_contain_text(
        "Could not delete workspace ui-edited: workspace 'ui-edited' holds 1 experiment(s)"
    )
    page.screenshot(path=str(artifacts / "81-workspace-delete-refused.png"), full_page=True)
    api(master, "GET", f"/workspaces/{ws['id']}")

    # an empty workspace is deleted, and the page goes to the list
    doomed = api(master, "POST", "/workspaces", {"name": "ui-doomed"})["workspace"]
    api(master, "POST", f"/workspaces/{doomed['id']}/projects", {"name": "ui-doomed-proj"})
    page.goto(f"{master}/#/workspaces/{doomed['id']}")
    expect(page.get_by_role("heading", name="Workspace ui-doomed")).to_be_visible()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#workspace-actions").get_by_role("button", name="Delete").click()
    expect(page.locator("#toast")).to_contain_text("Deleted workspace ui-doomed")
    expect(page).to_have_url(f"{master}/#/workspaces")
    expect(page.locator(f'#workspaces tr[data-key="{ws["id"]}"]')).to_be_visible()
    expect(page.locator(f'#workspaces tr[data-key="{doomed["id"]}"]')).to_have_count(0)
    gone = httpx.get(f"{master}/api/v1/workspaces/{doomed['id']}", headers=admin_headers(master))
    assert gone.status_code == 404


def test_a_workspaces_role_assignments(page: Page, master: str, artifacts: Path) -> None:
    """Listed (the creator is its admin), given to a user and to a group, taken, and the default
    role set; each checked through the API."""
    from playwright.sync_api import expect

    ws = api(master, "POST", "/workspaces", {"name": "ui-roles"})["workspace"]
    group = api(master, "POST", "/groups", {"name": "ui-readers"})["group"]
    outsider = api(master, "GET", f"/users?name={OUTSIDER}")["users"][0]

    sign_in(page, master)
    page.goto(f"{master}/#/workspaces/{ws['id']}")
    roles = page.locator("#workspace-roles")
    expect(roles.get_by_role("heading", name="Roles in ui-roles")).to_be_visible()
    creator = roles.locator("tr[data-key='user:admin']")
    expect(creator.locator("td[data-col='role']")).to_have_text("WorkspaceAdmin")
    expect(creator.locator("td[data-col='kind']")).to_have_text("user")
    expect(page.locator("#workspace-default-role")).to_have_attribute("data-role", "member")
    expect(page.locator("#workspace-roles-refused")).to_have_count(0)

    # give the outsider Editor, then Viewer (one role per workspace: it replaces the first)
    page.get_by_label("User or group").select_option(label=OUTSIDER)
    page.get_by_label("Role", exact=True).select_option(label="Editor")
    roles.get_by_role("button", name="Give role").click()
    expect(page.locator("#toast")).to_contain_text(f"{OUTSIDER} has role Editor in ui-roles")
    row = roles.locator(f"tr[data-key='user:{OUTSIDER}']")
    expect(row.locator("td[data-col='role']")).to_have_text("Editor")
    held = {a["username"]: a["role"] for a in workspace_roles(master, ws["id"])["assignments"]}
    assert held == {"admin": "admin", OUTSIDER: "editor"}
    page.get_by_label("User or group").select_option(label=OUTSIDER)
    page.get_by_label("Role", exact=True).select_option(label="Viewer")
    roles.get_by_role("button", name="Give role").click()
    expect(row.locator("td[data-col='role']")).to_have_text("Viewer")
    held = {a["username"]: a["role"] for a in workspace_roles(master, ws["id"])["assignments"]}
    assert held[OUTSIDER] == "viewer"

    # a group
    page.get_by_label("User or group").select_option(label="group ui-readers")
    page.get_by_label("Role", exact=True).select_option(label="Member")
    roles.get_by_role("button", name="Give role").click()
    expect(page.locator("#toast")).to_contain_text("group ui-readers has role Member in ui-roles")
    team = roles.locator("tr[data-key='group:ui-readers']")
    expect(team.locator("td[data-col='kind']")).to_have_text("group")
    expect(team.locator("td[data-col='role']")).to_have_text("Member")
    groups = workspace_roles(master, ws["id"])["groupAssignments"]
    assert [(g["groupId"], g["role"]) for g in groups] == [(group["groupId"], "member")]

    # no choice: said in the page, nothing sent
    roles.get_by_role("button", name="Give role").click()
    expect(page.locator("#workspace-roles-error")).to_have_text(
        "Pick the user or group to give a role to."
    )

    # the default role
    page.get_by_label("Default role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Set default role").click()
    expect(page.locator("#workspace-default-role")).to_have_attribute("data-role", "viewer")
    assert workspace_roles(master, ws["id"])["defaultRole"] == "viewer"
    page.screenshot(path=str(artifacts / "82-workspace-roles.png"), full_page=True)

    # taken away
    roles.get_by_role("button", name=f"Remove role Viewer of {OUTSIDER}").click()
    expect(page.locator("#toast")).to_contain_text(f"{OUTSIDER} no longer has role Viewer")
    expect(row).to_have_count(0)
    roles.get_by_role("button", name="Remove role Member of group ui-readers").click()
    expect(team).to_have_count(0)
    after = workspace_roles(master, ws["id"])
    assert [a["username"] for a in after["assignments"]] == ["admin"]
    assert after["groupAssignments"] == []
    assert outsider["username"] == OUTSIDER


def test_a_user_without_a_role_of_their_own_may_only_look(
    page: Page, master: str, artifacts: Path
) -> None:
    """The outsider (only the default role) sees who holds which role but no way to change them,
    and is shown the master's refusal when deleting the workspace."""
    from playwright.sync_api import expect

    ws = api(master, "POST", "/workspaces", {"name": "ui-look"})["workspace"]
    sign_in_as(page, master, OUTSIDER, OUTSIDER_PASSWORD)
    page.goto(f"{master}/#/workspaces/{ws['id']}")
    roles = page.locator("#workspace-roles")
    expect(roles.locator("tr[data-key='user:admin'] td[data-col='role']")).to_have_text(
        "WorkspaceAdmin"
    )
    expect(page.locator("#workspace-roles-refused")).to_contain_text(
        "Only an admin of this workspace (or a cluster admin) can give or take roles here"
    )
    expect(page.locator("#workspace-roles-form")).to_have_count(0)
    expect(page.locator("#workspace-default-form")).to_have_count(0)
    expect(roles.get_by_role("button", name="Remove")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#workspace-actions").get_by_role("button", name="Delete").click()
    expect(page.locator("#workspace-page-error")).to_contain_text(
        "Not allowed to delete workspace ui-look"
    )
    page.screenshot(path=str(artifacts / "83-workspace-look-only.png"), full_page=True)
    api(master, "GET", f"/workspaces/{ws['id']}")


def test_the_workspace_page_fits_a_phone(page: Page, master: str, artifacts: Path) -> None:
    """At 390 px the workspace page (actions, projects, roles and their forms) does not scroll
    sideways: wide tables scroll in their own boxes."""
    from playwright.sync_api import expect

    ws = api(master, "POST", "/workspaces", {"name": "ui-phone"})["workspace"]
    api(
        master,
        "POST",
        f"/workspaces/{ws['id']}/projects",
        {
            "name": "ui-phone-project",
            "description": "a project with a description long enough to wrap on a phone",
        },
    )
    page.set_viewport_size({"width": 390, "height": 900})
    sign_in(page, master)
    page.goto(f"{master}/#/workspaces/{ws['id']}")
    expect(page.locator("#workspace-roles-form")).to_be_visible()
    expect(page.locator("#projects tbody tr")).to_have_count(1)
    page.locator("#workspace-actions").get_by_role("button", name="Rename").click()
    expect(page.locator("#workspace-rename")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the workspace page is {width} px wide"
    page.screenshot(path=str(artifacts / "84-workspace-390px.png"), full_page=True)
