"""The Admin pages (#/admin/users, #/admin/groups) against a real master (no agent).

An admin reaches them from the header, creates a user with a password (a taken username is
refused with the master's reason), makes them an admin and takes it back, sets their password,
deactivates them (they can no longer sign in: checked through the login API) and is refused
deactivating themself; creates a user group (a taken name refused), adds the user, removes and
adds them again (checked through the groups API) and deletes another group after confirming. A
user who is not an admin has no Admin link and is told the pages are for administrators.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.ui.conftest import admin_headers, master_with_user, sign_in
from tests.ui.test_org import sign_in_as

if TYPE_CHECKING:
    from playwright.sync_api import Page

NEWCOMER = "ui-newcomer"
FIRST_PASSWORD = "newcomer-pass-1"
SECOND_PASSWORD = "newcomer-pass-2"
PLAIN = "ui-plain"
PLAIN_PASSWORD = "plain-pass-1"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real master without agents, with a user who is not an admin; its address."""
    with master_with_user(tmp_path_factory.mktemp("ui-admin"), PLAIN, PLAIN_PASSWORD) as url:
        yield url


def login(url: str, username: str, password: str) -> httpx.Response:
    """``POST /api/v1/auth/login`` as ``username``."""
    return httpx.post(f"{url}/api/v1/auth/login", json={"username": username, "password": password})


def user(url: str, username: str) -> dict[str, Any]:
    """The wire user ``username`` as the API serves it."""
    answer = httpx.get(f"{url}/api/v1/users/{username}/by-username", headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["user"]
    return found


def groups(url: str) -> dict[str, dict[str, Any]]:
    """Every user group by name, with its members' usernames (``GET /groups/ID``)."""
    headers = admin_headers(url)
    found = httpx.post(f"{url}/api/v1/groups/search", json={"limit": 0}, headers=headers)
    assert found.status_code == 200, found.text
    out: dict[str, dict[str, Any]] = {}
    for row in found.json()["groups"]:
        detail = httpx.get(f"{url}/api/v1/groups/{row['group']['groupId']}", headers=headers)
        assert detail.status_code == 200, detail.text
        group = detail.json()["group"]
        out[group["name"]] = {
            "id": group["groupId"],
            "members": sorted(u["username"] for u in group["users"]),
        }
    return out


def test_an_admin_manages_users(page: Page, master: str, artifacts: Path) -> None:
    from playwright.sync_api import expect

    sign_in(page, master)
    page.locator("#nav-admin").click()
    expect(page).to_have_url(f"{master}/#/admin/users")
    expect(page.locator("#nav-admin")).to_have_attribute("aria-current", "page")
    expect(page.locator("#users tr[data-key='admin'] td[data-col='admin']")).to_have_text("yes")
    expect(page.locator(f"#users tr[data-key='{PLAIN}'] td[data-col='admin']")).to_have_text("no")

    # Create a user with a password: listed, stored, and able to sign in.
    page.get_by_label("Username", exact=True).fill(NEWCOMER)
    page.get_by_label("Display name").fill("New Comer")
    page.get_by_label("Password", exact=True).fill(FIRST_PASSWORD)
    page.get_by_role("button", name="Create user").click()
    row = page.locator(f"#users tr[data-key='{NEWCOMER}']")
    expect(row.locator("td[data-col='displayName']")).to_have_text("New Comer")
    expect(row.locator("td[data-col='active']")).to_have_text("yes")
    expect(row.locator("td[data-col='admin']")).to_have_text("no")
    expect(page.locator("#user-error")).to_have_text("")
    stored = user(master, NEWCOMER)
    assert (stored["displayName"], stored["active"], stored["admin"]) == ("New Comer", True, False)
    assert login(master, NEWCOMER, FIRST_PASSWORD).status_code == 200

    # The same username again is refused with the master's reason.
    page.get_by_label("Username", exact=True).fill(NEWCOMER)
    page.get_by_label("Password", exact=True).fill(FIRST_PASSWORD)
    page.get_by_role("button", name="Create user").click()
    expect(page.locator("#user-error")).to_have_text(
        f"Could not create the user: user '{NEWCOMER}' already exists"
    )

    # Make them an admin and take it back.
    page.get_by_role("button", name=f"Make admin {NEWCOMER}").click()
    expect(row.locator("td[data-col='admin']")).to_have_text("yes")
    assert user(master, NEWCOMER)["admin"] is True
    page.get_by_role("button", name=f"Remove admin rights of {NEWCOMER}").click()
    expect(row.locator("td[data-col='admin']")).to_have_text("no")
    assert user(master, NEWCOMER)["admin"] is False

    # Set their password: the new one signs in, the old one no longer does.
    page.get_by_label("User", exact=True).select_option(label=NEWCOMER)
    page.get_by_label("New password").fill(SECOND_PASSWORD)
    page.get_by_role("button", name="Set password").click()
    expect(page.locator("#toast")).to_contain_text(f"The password of {NEWCOMER} is changed")
    expect(page.locator("#reset-error")).to_have_text("")
    assert login(master, NEWCOMER, SECOND_PASSWORD).status_code == 200
    assert login(master, NEWCOMER, FIRST_PASSWORD).status_code == 401

    # Deactivate them: they can no longer sign in.
    page.get_by_role("button", name=f"Deactivate {NEWCOMER}").click()
    expect(row.locator("td[data-col='active']")).to_have_text("no")
    expect(page.get_by_role("button", name=f"Activate {NEWCOMER}")).to_be_visible()
    refused = login(master, NEWCOMER, SECOND_PASSWORD)
    assert refused.status_code == 403, refused.text
    assert "not active" in refused.text
    assert user(master, NEWCOMER)["active"] is False

    # An admin cannot deactivate themself: the master's reason is shown.
    page.get_by_role("button", name="Deactivate admin", exact=True).click()
    expect(page.locator("#users-error")).to_have_text(
        "Could not deactivate admin: you cannot deactivate yourself "
        "(another admin can deactivate you)"
    )
    expect(page.locator("#users tr[data-key='admin'] td[data-col='active']")).to_have_text("yes")
    page.screenshot(path=str(artifacts / "50-admin-users.png"), full_page=True)


def test_an_admin_manages_groups(page: Page, master: str, artifacts: Path) -> None:
    from playwright.sync_api import expect

    headers = admin_headers(master)
    if NEWCOMER not in {
        u["username"] for u in httpx.get(f"{master}/api/v1/users", headers=headers).json()["users"]
    }:  # when run alone
        made = httpx.post(
            f"{master}/api/v1/users",
            json={"user": {"username": NEWCOMER, "active": True}, "password": FIRST_PASSWORD},
            headers=headers,
        )
        assert made.status_code == 200, made.text
    sign_in(page, master)
    page.goto(f"{master}/#/admin/users")
    page.locator("#admin-tabs a[data-tab='groups']").click()
    expect(page.locator("#groups-empty")).to_be_visible()

    for name in ("ui-team", "ui-doomed"):
        page.get_by_label("Name", exact=True).fill(name)
        page.get_by_role("button", name="Create group").click()
        expect(page.locator(f"#groups tr[data-key='{name}']")).to_be_visible()
    assert set(groups(master)) == {"ui-team", "ui-doomed"}
    # A taken name is refused with the master's reason.
    page.get_by_label("Name", exact=True).fill("ui-team")
    page.get_by_role("button", name="Create group").click()
    expect(page.locator("#group-error")).to_have_text(
        "Could not create the group: a user group named 'ui-team' already exists"
    )

    # Add the user to ui-team; remove them; add them again.
    team = page.locator("#groups tr[data-key='ui-team']")
    page.get_by_role("button", name="Members of ui-team").click()
    expect(page.locator("#members-title")).to_have_text("Members of ui-team")
    assert "group=" in page.url
    page.locator("#member-add").select_option(label=NEWCOMER)
    page.get_by_role("button", name="Add member").click()
    expect(page.locator(f"#group-members li[data-key='{NEWCOMER}']")).to_be_visible()
    expect(team.locator("td[data-col='members']")).to_have_text("1")
    assert groups(master)["ui-team"]["members"] == [NEWCOMER]
    page.get_by_role("button", name=f"Remove {NEWCOMER} from ui-team").click()
    expect(page.locator(f"#group-members li[data-key='{NEWCOMER}']")).to_have_count(0)
    expect(team.locator("td[data-col='members']")).to_have_text("0")
    assert groups(master)["ui-team"]["members"] == []
    page.locator("#member-add").select_option(label=NEWCOMER)
    page.get_by_role("button", name="Add member").click()
    expect(page.locator(f"#group-members li[data-key='{NEWCOMER}']")).to_be_visible()
    assert groups(master)["ui-team"]["members"] == [NEWCOMER]
    # The open group is in the address: a reload shows its members again.
    page.reload()
    expect(page.locator(f"#group-members li[data-key='{NEWCOMER}']")).to_be_visible()

    # Delete the other group after confirming.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete group ui-doomed").click()
    expect(page.locator("#groups tr[data-key='ui-doomed']")).to_have_count(0)
    assert set(groups(master)) == {"ui-team"}
    page.screenshot(path=str(artifacts / "51-admin-groups.png"), full_page=True)


def test_a_user_who_is_not_an_admin_is_told_so(page: Page, master: str, artifacts: Path) -> None:
    from playwright.sync_api import expect

    sign_in_as(page, master, PLAIN, PLAIN_PASSWORD)
    expect(page.locator("#nav-experiments")).to_be_visible()
    expect(page.locator("#nav-admin")).to_be_hidden()
    page.goto(f"{master}/#/admin/users")
    expect(page.locator("#admin-refused")).to_contain_text("Only administrators can manage users")
    expect(page.locator("#users")).to_have_count(0)
    page.goto(f"{master}/#/admin/groups")
    expect(page.locator("#admin-refused")).to_be_visible()
    expect(page.locator("#groups")).to_have_count(0)
    page.screenshot(path=str(artifacts / "52-admin-refused.png"), full_page=True)
