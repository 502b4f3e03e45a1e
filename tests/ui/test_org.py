"""The Templates page (#/templates) and the Settings page (#/settings) against a real master
(no agent: nothing here runs a task).

Templates: an empty list says so; a template created from the form's YAML is listed, viewed as
YAML, updated and deleted (after confirm), each checked through the API; YAML that is not a
mapping is refused before it is sent; a missing template's address says so; Rename in a row
(a taken name and a user below editor refused with the master's reason). A user without a
role in a workspace neither sees its templates nor may create one there (the master's reason is
shown). Settings: a user changes their display name and their password (a wrong current password
and a mistyped repetition are refused in the page), and the new password signs in.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from stalwart.local import LocalCluster
from tests.integration.conftest import MASTER_CONFIG, free_port
from tests.ui.conftest import admin_headers, sign_in
from tests.ui.test_pages import CONTRAST

if TYPE_CHECKING:
    from playwright.sync_api import Page

OUTSIDER = "ui-outsider"
OUTSIDER_PASSWORD = "outsider-pass-1"
READER = "ui-reader"
READER_PASSWORD = "reader-pass-1"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real master without agents; its address."""
    home = tmp_path_factory.mktemp("ui-org")
    config = home / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=home / "home", port=free_port(), master_config=config)
    cluster.start_master()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def private_workspace(master: str) -> int:
    """A workspace (default role ``none``) the outsider, a user with a password and no role
    assignment, has no role in."""
    headers = admin_headers(master)
    made = httpx.post(
        f"{master}/api/v1/users",
        json={"user": {"username": OUTSIDER, "active": True}, "password": OUTSIDER_PASSWORD},
        headers=headers,
    )
    assert made.status_code == 200, made.text
    ws = httpx.post(f"{master}/api/v1/workspaces", json={"name": "ui-private"}, headers=headers)
    assert ws.status_code == 200, ws.text
    workspace_id: int = ws.json()["workspace"]["id"]
    private = httpx.put(
        f"{master}/api/v1/workspaces/{workspace_id}/roles/default",
        json={"role": "none"},
        headers=headers,
    )
    assert private.status_code == 200, private.text
    return workspace_id


def sign_in_as(page: Page, url: str, username: str, password: str) -> None:
    """Open the UI and sign in as ``username``."""
    from playwright.sync_api import expect

    page.goto(url + "/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", name="Experiments", exact=True)).to_be_visible()


def templates(url: str, headers: dict[str, str]) -> dict[str, dict[str, object]]:
    """The templates ``headers``' user may read: name -> wire template."""
    answer = httpx.get(f"{url}/api/v1/templates", headers=headers)
    assert answer.status_code == 200, answer.text
    return {t["name"]: t for t in answer.json()["templates"]}


def test_templates_page(page: Page, master: str, private_workspace: int, artifacts: Path) -> None:
    from playwright.sync_api import expect

    headers = admin_headers(master)
    sign_in(page, master)
    page.get_by_role("link", name="Templates", exact=True).click()
    expect(page.get_by_role("heading", name="Templates", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Templates", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator(".empty")).to_contain_text("No templates you can read yet")
    page.screenshot(path=str(artifacts / "30-templates-empty.png"), full_page=True)

    # YAML that is not a mapping never reaches the master
    page.get_by_label("Name", exact=True).fill("ui-bad")
    page.get_by_label("Config (YAML)").fill("- just\n- a list\n")
    page.get_by_role("button", name="Create template").click()
    expect(page.locator("#template-error")).to_have_text(
        "The config must be a mapping (key: value lines)."
    )
    assert "ui-bad" not in templates(master, headers)

    # create: listed, and the API holds the parsed config
    page.get_by_label("Name", exact=True).fill("ui-gpu")
    page.get_by_label("Config (YAML)").fill(
        "resources:\n  slots_per_trial: 2\ndescription: from the UI\n"
    )
    page.get_by_role("button", name="Create template").click()
    expect(page.locator("#toast")).to_contain_text("Created template ui-gpu")
    made = templates(master, headers)["ui-gpu"]
    assert made["config"] == {"resources": {"slots_per_trial": 2}, "description": "from the UI"}
    assert made["workspaceId"] == 1
    row = page.locator('#templates tr[data-key="ui-gpu"]')
    expect(row.locator("td").nth(1)).to_have_text("1")
    expect(row.locator("td").nth(2)).to_have_text("resources, description")
    expect(page).to_have_url(f"{master}/#/templates?name=ui-gpu")
    expect(page.locator("#template-yaml")).to_have_text(
        "resources:\n  slots_per_trial: 2\ndescription: from the UI\n"
    )

    # update through Edit: the form holds its YAML, and the button says Update
    row.get_by_role("button", name="Edit template ui-gpu").click()
    expect(page.get_by_label("Config (YAML)")).to_have_value(
        "resources:\n  slots_per_trial: 2\ndescription: from the UI\n"
    )
    page.get_by_label("Config (YAML)").fill("resources:\n  slots_per_trial: 4\n")
    page.get_by_role("button", name="Update template").click()
    expect(page.locator("#toast")).to_contain_text("Updated template ui-gpu")
    expect(page.locator("#template-yaml")).to_have_text("resources:\n  slots_per_trial: 4\n")
    assert templates(master, headers)["ui-gpu"]["config"] == {"resources": {"slots_per_trial": 4}}
    page.screenshot(path=str(artifacts / "31-templates.png"), full_page=True)
    for _ in range(2):  # text keeps a contrast of at least 4.5:1 in both themes
        ratios: dict[str, float] = page.evaluate(CONTRAST)
        theme = page.evaluate("document.documentElement.dataset.theme")
        for selector, ratio in ratios.items():
            assert ratio >= 4.5, f"{selector} has contrast {ratio:.2f} in the {theme} theme"
        page.locator("#theme-toggle").click()

    # a template of the private workspace, made by the admin through the API
    secret = httpx.post(
        f"{master}/api/v1/templates/ui-secret",
        json={"config": {"description": "private"}, "workspaceId": private_workspace},
        headers=headers,
    )
    assert secret.status_code == 200, secret.text
    expect(page.locator('#templates tr[data-key="ui-secret"] td').nth(1)).to_have_text(
        str(private_workspace)
    )

    # a missing template's address says so
    page.goto(f"{master}/#/templates?name=nope")
    expect(page.locator("#template-missing")).to_have_text(
        "There is no template named “nope” that you can read."
    )

    # delete, after confirming
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete template ui-gpu").click()
    expect(page.locator('#templates tr[data-key="ui-gpu"]')).to_have_count(0)
    assert "ui-gpu" not in templates(master, headers)


def test_templates_without_a_role(
    page: Page, master: str, private_workspace: int, artifacts: Path
) -> None:
    """A user without a role in the private workspace sees none of its templates and is told
    why a template there is refused."""
    from playwright.sync_api import expect

    headers = admin_headers(master)
    if "ui-hidden" not in templates(master, headers):
        made = httpx.post(
            f"{master}/api/v1/templates/ui-hidden",
            json={"config": {"description": "private"}, "workspaceId": private_workspace},
            headers=headers,
        )
        assert made.status_code == 200, made.text
    sign_in_as(page, master, OUTSIDER, OUTSIDER_PASSWORD)
    page.goto(f"{master}/#/templates?name=ui-hidden")
    expect(page.locator("#templates-count")).not_to_have_text("")
    expect(page.locator('#templates tr[data-key="ui-hidden"]')).to_have_count(0)
    expect(page.locator("#template-missing")).to_contain_text("ui-hidden")
    page.get_by_label("Name", exact=True).fill("ui-intruder")
    page.get_by_label("Workspace ID").fill(str(private_workspace))
    page.get_by_label("Config (YAML)").fill("description: not mine\n")
    page.get_by_role("button", name="Create template").click()
    expect(page.locator("#template-error")).to_have_text(
        f"Could not save template ui-intruder: workspace {private_workspace} not found"
    )
    page.screenshot(path=str(artifacts / "32-templates-forbidden.png"), full_page=True)
    assert "ui-intruder" not in templates(master, headers)


def test_settings_page(page: Page, master: str, private_workspace: int, artifacts: Path) -> None:
    from playwright.sync_api import expect

    assert private_workspace  # the outsider exists
    sign_in_as(page, master, OUTSIDER, OUTSIDER_PASSWORD)
    page.get_by_role("link", name="Settings", exact=True).click()
    expect(page.get_by_role("heading", name="Settings", exact=True)).to_be_visible()
    expect(page.locator('dd[data-field="Username"]')).to_have_text(OUTSIDER)
    expect(page.locator('dd[data-field="Role"]')).to_have_text("user")

    # the display name
    page.get_by_role("textbox", name="Display name").fill("Outside Person")
    page.get_by_role("button", name="Save display name").click()
    expect(page.locator("#toast")).to_contain_text("Your display name is now Outside Person")
    expect(page.locator('dd[data-field="Display name"]')).to_have_text("Outside Person")
    token = httpx.post(
        f"{master}/api/v1/auth/login",
        json={"username": OUTSIDER, "password": OUTSIDER_PASSWORD},
    ).json()["token"]
    me = httpx.get(f"{master}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["user"]["displayName"] == "Outside Person"

    # the password: a wrong current one and a mistyped repetition are refused in the page
    page.get_by_label("Current password").fill("wrong-password")
    page.get_by_label("New password", exact=True).fill("outsider-pass-2")
    page.get_by_label("New password again").fill("outsider-pass-2")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#password-error")).to_have_text("The current password is wrong.")
    page.get_by_label("Current password").fill(OUTSIDER_PASSWORD)
    page.get_by_label("New password again").fill("outsider-pass-3")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#password-error")).to_have_text(
        "The new password and its repetition differ."
    )
    page.get_by_label("New password again").fill("outsider-pass-2")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#toast")).to_contain_text("Your password is changed")
    expect(page.locator("#password-error")).to_have_text("")
    page.screenshot(path=str(artifacts / "33-settings.png"), full_page=True)

    def login(password: str) -> int:
        answer = httpx.post(
            f"{master}/api/v1/auth/login", json={"username": OUTSIDER, "password": password}
        )
        return answer.status_code

    assert login("outsider-pass-2") == 200
    assert login(OUTSIDER_PASSWORD) == 401
    # the page's own session is kept; the other one (the token above) is ended
    page.reload()
    expect(page.locator('dd[data-field="Display name"]')).to_have_text("Outside Person")
    gone = httpx.get(f"{master}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert gone.status_code == 401


def test_renaming_a_template(
    page: Page, master: str, private_workspace: int, artifacts: Path
) -> None:
    """Rename, in the template's row: a name another template has is refused with the master's
    reason, a new one renames it (the shown template follows, the API holds it); a user who may
    read a template but not change it is shown the master's refusal."""
    from playwright.sync_api import expect

    headers = admin_headers(master)
    for name, config in (("ui-first", {"description": "first"}), ("ui-taken", {})):
        made = httpx.put(
            f"{master}/api/v1/templates/{name}", json={"config": config}, headers=headers
        )
        assert made.status_code == 200, made.text

    sign_in(page, master)
    page.goto(f"{master}/#/templates?name=ui-first")
    expect(page.locator("#template-yaml")).to_have_text("description: first\n")
    page.get_by_role("button", name="Rename template ui-first").click()
    field = page.get_by_label("New name for template ui-first")
    expect(field).to_have_value("ui-first")
    expect(field).to_be_focused()
    field.fill("ui-taken")
    field.press("Enter")
    expect(page.locator("#template-rename-error")).to_have_text(
        "Could not rename template ui-first: a template named 'ui-taken' already exists"
    )
    assert {"ui-first", "ui-taken"} <= set(templates(master, headers))
    page.screenshot(path=str(artifacts / "73-templates-rename-refused.png"), full_page=True)

    field.fill("ui-renamed")
    page.get_by_role("button", name="Save name").click()
    expect(page.locator("#toast")).to_contain_text("Renamed template ui-first to ui-renamed")
    expect(page.locator("#template-rename-error")).to_have_text("")
    expect(page.locator('#templates tr[data-key="ui-first"]')).to_have_count(0)
    expect(page.locator('#templates tr[data-key="ui-renamed"] td').first).to_have_text("ui-renamed")
    expect(page).to_have_url(f"{master}/#/templates?name=ui-renamed")
    expect(page.locator("#template-yaml")).to_have_text("description: first\n")
    held = templates(master, headers)
    assert "ui-first" not in held
    assert held["ui-renamed"]["config"] == {"description": "first"}

    # a user who reads workspace 1's templates but may not change them
    made = httpx.post(
        f"{master}/api/v1/users",
        json={"user": {"username": READER, "active": True}, "password": READER_PASSWORD},
        headers=headers,
    )
    assert made.status_code in (200, 409), made.text
    assert "ui-renamed" in templates(master, sign_in_headers(master, READER, READER_PASSWORD))
    page.evaluate("sessionStorage.clear()")
    sign_in_as(page, master, READER, READER_PASSWORD)
    page.goto(f"{master}/#/templates")
    page.get_by_role("button", name="Rename template ui-renamed").click()
    page.get_by_label("New name for template ui-renamed").fill("ui-mine")
    page.get_by_role("button", name="Save name").click()
    expect(page.locator("#template-rename-error")).to_contain_text(
        f"Not allowed to rename template ui-renamed: user {READER} cannot change template"
    )
    assert "ui-renamed" in templates(master, headers)


def sign_in_headers(url: str, username: str, password: str) -> dict[str, str]:
    """``Authorization: Bearer`` with a fresh token of ``username``."""
    answer = httpx.post(
        f"{url}/api/v1/auth/login", json={"username": username, "password": password}
    )
    answer.raise_for_status()
    return {"Authorization": f"Bearer {answer.json()['token']}"}
