"""The Admin pages (#/admin/users, #/admin/groups) against a real master (no agent).

An admin reaches them from the header, creates a user with a password (a taken username is
refused with the master's reason), makes them an admin and takes it back, sets their password,
deactivates them (they can no longer sign in: checked through the login API) and is refused
deactivating themself; creates a user group (a taken name refused), adds the user, removes and
adds them again (checked through the groups API) and deletes another group after confirming. A
user who is not an admin has no Admin link and is told the pages are for administrators. The
Users table is not read again while nothing happens (no timer), and is read again when the tab
is shown again.
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
    page.get_by_label("Display name", exact=True).fill("New Comer")
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


WORKSPACE = "ui-research"
MANY = [f"ui-many-{n:02d}" for n in range(1, 23)]


def _ensure(url: str) -> dict[str, int]:
    """NEWCOMER, the MANY users, group ui-team with NEWCOMER in it and workspace WORKSPACE exist
    (made through the API when this test runs alone); their ids by name."""
    headers = admin_headers(url)
    have = {
        u["username"] for u in httpx.get(f"{url}/api/v1/users", headers=headers).json()["users"]
    }
    for name in [NEWCOMER, *MANY]:
        if name not in have:
            made = httpx.post(
                f"{url}/api/v1/users",
                json={"user": {"username": name, "active": True}, "password": FIRST_PASSWORD},
                headers=headers,
            )
            assert made.status_code == 200, made.text
    ids = {"user": user(url, NEWCOMER)["id"]}
    if "ui-team" not in groups(url):
        made = httpx.post(f"{url}/api/v1/groups", json={"name": "ui-team"}, headers=headers)
        assert made.status_code == 200, made.text
    team = groups(url)["ui-team"]
    if NEWCOMER not in team["members"]:
        put = httpx.put(
            f"{url}/api/v1/groups/{team['id']}",
            json={"groupId": team["id"], "addUsers": [ids["user"]]},
            headers=headers,
        )
        assert put.status_code == 200, put.text
    ids["group"] = team["id"]
    spaces = httpx.get(f"{url}/api/v1/workspaces", headers=headers).json()["workspaces"]
    found = [w["id"] for w in spaces if w["name"] == WORKSPACE]
    if not found:
        made = httpx.post(f"{url}/api/v1/workspaces", json={"name": WORKSPACE}, headers=headers)
        assert made.status_code == 200, made.text
        found = [made.json()["workspace"]["id"]]
    ids["workspace"] = found[0]
    return ids


def user_roles(url: str, user_id: int) -> set[tuple[str, int, str]]:
    """(role, workspace id, "direct" or the group id) of every role user ``user_id`` has."""
    answer = httpx.get(f"{url}/api/v1/roles/search/by-user/{user_id}", headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    out: set[tuple[str, int, str]] = set()
    for r in answer.json()["roles"]:
        for a in r["userRoleAssignments"]:
            out.add((r["role"]["name"], a["roleAssignment"]["scopeWorkspaceId"], "direct"))
        for a in r["groupRoleAssignments"]:
            out.add((r["role"]["name"], a["roleAssignment"]["scopeWorkspaceId"], str(a["groupId"])))
    return out


def test_an_admin_searches_pages_and_renames_users(
    page: Page, master: str, artifacts: Path
) -> None:
    """The Users table shows 20 users a page (the page in the address), finds users by name,
    and a user's Edit panel changes their display name."""
    from playwright.sync_api import expect

    _ensure(master)
    total = len(httpx.get(f"{master}/api/v1/users", headers=admin_headers(master)).json()["users"])
    assert total > 20
    sign_in(page, master)
    page.goto(f"{master}/#/admin/users")
    rows = page.locator("#users tbody tr")
    expect(rows).to_have_count(20)
    expect(page.locator("#users-range")).to_have_text(f"1\u201320 of {total} users")
    expect(page.get_by_role("button", name="Previous")).to_be_disabled()
    page.get_by_role("button", name="Next").click()
    expect(rows).to_have_count(total - 20)
    expect(page.locator("#users-range")).to_have_text(f"21\u2013{total} of {total} users")
    assert "page=2" in page.url
    page.reload()
    expect(rows).to_have_count(total - 20)

    # Search: by part of the username, back to the first page.
    page.get_by_label("Search", exact=True).fill("ui-many-0")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(rows).to_have_count(9)
    expect(page.locator("#users-range")).to_have_text("1\u20139 of 9 users")
    assert "q=ui-many-0" in page.url
    assert "page=" not in page.url
    page.get_by_label("Search", exact=True).fill("nobody-is-called-this")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#users-empty")).to_have_text("No user matches “nobody-is-called-this”.")

    # Rename NEWCOMER from their panel (opened from the search).
    page.get_by_label("Search", exact=True).fill(NEWCOMER)
    page.get_by_role("button", name="Search", exact=True).click()
    expect(rows).to_have_count(1)
    page.get_by_role("button", name=f"Edit {NEWCOMER}").click()
    panel = page.locator("#user-panel")
    expect(panel).to_have_attribute("data-user", NEWCOMER)
    panel.get_by_label("Display name", exact=True).fill("Renamed Comer")
    panel.get_by_role("button", name="Save name").click()
    expect(page.locator("#user-panel-title")).to_have_text(f"Renamed Comer ({NEWCOMER})")
    expect(
        page.locator(f"#users tr[data-key='{NEWCOMER}'] td[data-col='displayName']")
    ).to_have_text("Renamed Comer")
    assert user(master, NEWCOMER)["displayName"] == "Renamed Comer"
    # Their password, from the panel (active again, so that the new one signs in): too short
    # is refused with the master's reason.
    activated = httpx.patch(
        f"{master}/api/v1/users/{user(master, NEWCOMER)['id']}",
        json={"active": True},
        headers=admin_headers(master),
    )
    assert activated.status_code == 200, activated.text
    panel.get_by_label(f"New password for {NEWCOMER}").fill("short")
    panel.get_by_role("button", name="Set password").click()
    expect(panel.locator("#panel-password-error")).to_contain_text(
        f"Could not set the password of {NEWCOMER}: "
    )
    panel.get_by_label(f"New password for {NEWCOMER}").fill("panel-pass-3")
    panel.get_by_role("button", name="Set password").click()
    expect(page.locator("#toast")).to_contain_text(f"The password of {NEWCOMER} is changed")
    expect(panel.locator("#panel-password-error")).to_have_text("")
    assert login(master, NEWCOMER, "panel-pass-3").status_code == 200
    assert login(master, NEWCOMER, "short").status_code == 401
    # An address naming no user says so (once: no toast every poll).
    page.goto(f"{master}/#/admin/users?user=9999")
    expect(page.locator("#user-missing")).to_contain_text("There is no user 9999.")
    expect(page.locator("#toast")).to_have_text("")
    page.goto(f"{master}/#/admin/users?q={NEWCOMER}&user={user(master, NEWCOMER)['id']}")
    expect(page.locator("#user-roles form")).to_be_visible()
    page.screenshot(path=str(artifacts / "55-admin-user-panel.png"), full_page=True)


def is_users_read(url: str, method: str) -> bool:
    """Whether a request is a read of the Users table (``GET /api/v1/users`` or ``?...``)."""
    path = url.split("#", 1)[0]
    return method == "GET" and (path.endswith("/api/v1/users") or "/api/v1/users?" in path)


def test_the_users_table_reads_only_when_something_happens(
    page: Page, master: str, artifacts: Path
) -> None:
    """Idle, the Users table asks nothing (half a minute of the page's timers runs on a fake
    clock; a later request of another kind shows every earlier one was seen); a user made
    elsewhere shows once the tab is shown again (visibilitychange), and after an action."""
    from playwright.sync_api import expect

    page.clock.install()
    # Opened at the users page and signed in there: one navigation, none for the fake clock's
    # timers to race (once, a hash navigation right after signing in was lost to them).
    sign_in(page, master, at="#/admin/users?q=ui-idle")
    expect(page.locator("#users-empty")).to_have_text("No user matches “ui-idle”.")
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if is_users_read(r.url, r.method) else None)

    page.clock.run_for(30_000)  # ten times the old 3 s poll, 60 times the tests' 500 ms
    marker = (
        "fetch('/api/v1/me', {headers: "
        "{Authorization: 'Bearer ' + sessionStorage.getItem('stalwart.token')}})"
    )
    with page.expect_response(lambda r: r.url.endswith("/api/v1/me")):
        page.evaluate(marker)
    assert reads == [], reads

    # a user made by someone else: not shown until the tab is shown again
    made = httpx.post(
        f"{master}/api/v1/users",
        json={"user": {"username": "ui-idle-1", "active": True}, "password": "idle-pass-1"},
        headers=admin_headers(master),
    )
    assert made.status_code == 200, made.text
    page.clock.run_for(10_000)
    with page.expect_response(lambda r: r.url.endswith("/api/v1/me")):
        page.evaluate(marker)
    assert reads == [], reads
    expect(page.locator("#users tbody tr")).to_have_count(0)
    with page.expect_request(lambda r: is_users_read(r.url, r.method)):
        page.evaluate(
            """() => {
              for (const state of ["hidden", "visible"]) {
                Object.defineProperty(
                  document, "visibilityState", {value: state, configurable: true},
                );
                document.dispatchEvent(new Event("visibilitychange"));
              }
            }"""
        )
    rows = page.locator("#users tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("ui-idle-1")
    assert len(reads) == 1, reads  # hidden asked nothing, visible once

    # after an action (deactivating), the table is read again and says so
    with page.expect_request(lambda r: is_users_read(r.url, r.method)):
        page.get_by_role("button", name="Deactivate ui-idle-1").click()
    expect(page.get_by_role("button", name="Activate ui-idle-1")).to_be_visible()
    page.screenshot(path=str(artifacts / "93-admin-users-read-on-visible.png"), full_page=True)


def test_an_admin_gives_and_takes_roles(page: Page, master: str, artifacts: Path) -> None:
    """Roles of a user (in a workspace and cluster-wide) and of a group, given and taken from
    the Admin pages, each checked through the roles API; the roles a user has through a group
    are shown on the user; taking a role the user no longer has shows the master's reason."""
    from playwright.sync_api import expect

    ids = _ensure(master)
    uid, gid, wid = ids["user"], ids["group"], ids["workspace"]
    for held in user_roles(master, uid):  # a clean start when run again against the master
        kind = "group" if held[2] != "direct" else "user"
        who = {"groupId": gid} if kind == "group" else {"userId": uid}
        httpx.post(
            f"{master}/api/v1/roles/remove-assignments",
            json={
                f"{kind}RoleAssignments": [
                    {
                        **who,
                        "roleAssignment": {
                            "role": {"roleId": _role_id(master, held[0])},
                            "scopeWorkspaceId": held[1],
                        },
                    }
                ]
            },
            headers=admin_headers(master),
        ).raise_for_status()
    sign_in(page, master)
    page.goto(f"{master}/#/admin/users?q={NEWCOMER}&user={uid}")
    roles = page.locator("#user-roles")
    expect(roles.locator("#user-roles-empty")).to_be_visible()

    # A workspace role, given and shown.
    roles.get_by_label("Where", exact=True).select_option(label=WORKSPACE)
    roles.get_by_label("Role", exact=True).select_option(label="Editor")
    roles.get_by_role("button", name="Give role").click()
    editor = roles.locator(f"tr[data-key='Editor@{WORKSPACE}']")
    expect(editor.locator("td[data-col='through']")).to_have_text("directly")
    assert user_roles(master, uid) == {("Editor", wid, "direct")}

    # Cluster-wide: the admin flag, shown as ClusterAdmin, and taken back.
    roles.get_by_label("Where", exact=True).select_option(label="Cluster-wide")
    expect(roles.get_by_label("Role", exact=True)).to_have_value("")
    expect(roles.get_by_label("Role", exact=True).locator("option")).to_have_text(["ClusterAdmin"])
    roles.get_by_role("button", name="Give role").click()
    cluster = page.locator("#user-roles tr[data-key='ClusterAdmin@Cluster-wide']")
    expect(cluster).to_be_visible()
    assert user(master, NEWCOMER)["admin"] is True
    expect(page.locator(f"#users tr[data-key='{NEWCOMER}'] td[data-col='admin']")).to_have_text(
        "yes"
    )
    page.get_by_role(
        "button", name=f"Remove role ClusterAdmin in Cluster-wide from {NEWCOMER}"
    ).click()
    expect(page.locator("#user-roles tr[data-key='ClusterAdmin@Cluster-wide']")).to_have_count(0)
    assert user(master, NEWCOMER)["admin"] is False

    # Taken behind the page's back: Remove shows the master's reason, and the role stays shown.
    page.get_by_role("button", name=f"Remove role Editor in {WORKSPACE} from {NEWCOMER}").click()
    expect(page.locator("#user-roles tr[data-key^='Editor@']")).to_have_count(0)
    assert user_roles(master, uid) == set()
    roles = page.locator("#user-roles")
    roles.get_by_label("Where", exact=True).select_option(label=WORKSPACE)
    roles.get_by_label("Role", exact=True).select_option(label="Viewer")
    roles.get_by_role("button", name="Give role").click()
    expect(roles.locator(f"tr[data-key='Viewer@{WORKSPACE}']")).to_be_visible()
    httpx.post(
        f"{master}/api/v1/roles/remove-assignments",
        json={
            "userRoleAssignments": [
                {
                    "userId": uid,
                    "roleAssignment": {
                        "role": {"roleId": _role_id(master, "Viewer")},
                        "scopeWorkspaceId": wid,
                    },
                }
            ]
        },
        headers=admin_headers(master),
    ).raise_for_status()
    page.get_by_role("button", name=f"Remove role Viewer in {WORKSPACE} from {NEWCOMER}").click()
    expect(page.locator("#user-roles-error")).to_have_text(
        f"Could not take role Viewer in {WORKSPACE} from {NEWCOMER}: user '{NEWCOMER}' does not "
        f"have role Viewer in workspace '{WORKSPACE}' (it has none there)"
    )

    # A group's role: given on the group, shown on its member as given through it.
    page.goto(f"{master}/#/admin/groups?group={gid}")
    group = page.locator("#group-roles")
    expect(group.locator("#group-roles-empty")).to_be_visible()
    expect(
        group.get_by_label("Where", exact=True).locator("option", has_text="Cluster-wide")
    ).to_have_count(0)
    expect(page.locator("#group-roles-note")).to_contain_text("no cluster-wide group role")
    group.get_by_label("Where", exact=True).select_option(label=WORKSPACE)
    group.get_by_label("Role", exact=True).select_option(label="Member")
    group.get_by_role("button", name="Give role").click()
    expect(group.locator(f"tr[data-key='Member@{WORKSPACE}']")).to_be_visible()
    assert user_roles(master, uid) == {("Member", wid, str(gid))}
    page.screenshot(path=str(artifacts / "56-admin-group-roles.png"), full_page=True)
    page.goto(f"{master}/#/admin/users?q={NEWCOMER}&user={uid}")
    through = page.locator(f"#user-roles tr[data-key='Member@{WORKSPACE}']")
    expect(through.locator("td[data-col='through']")).to_have_text("through group ui-team")
    expect(through.get_by_role("button")).to_have_count(0)
    page.screenshot(path=str(artifacts / "57-admin-user-roles.png"), full_page=True)

    page.goto(f"{master}/#/admin/groups?group={gid}")
    page.get_by_role("button", name=f"Remove role Member in {WORKSPACE} from ui-team").click()
    expect(page.locator("#group-roles-empty")).to_be_visible()
    assert user_roles(master, uid) == set()


def _role_id(url: str, name: str) -> int:
    """The id of role ``name`` (``POST /roles/search``)."""
    answer = httpx.post(f"{url}/api/v1/roles/search", json={}, headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    return next(int(r["roleId"]) for r in answer.json()["roles"] if r["name"] == name)


def test_the_admin_pages_fit_a_phone(page: Page, master: str, artifacts: Path) -> None:
    """At 390 px the users table, a user's panel with their roles and the groups page do not
    make the page scroll sideways (wide tables scroll in their own boxes)."""
    from playwright.sync_api import expect

    ids = _ensure(master)
    page.set_viewport_size({"width": 390, "height": 900})
    sign_in(page, master)
    for address, shown in (
        (f"#/admin/users?user={ids['user']}", "#user-roles form"),
        (f"#/admin/groups?group={ids['group']}", "#group-roles form"),
    ):
        page.goto(f"{master}/{address}")
        expect(page.locator(shown)).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{address} is {width} px wide"
    page.screenshot(path=str(artifacts / "58-admin-groups-390px.png"), full_page=True)
    page.goto(f"{master}/#/admin/users?user={ids['user']}")
    expect(page.locator("#user-roles form")).to_be_visible()
    page.screenshot(path=str(artifacts / "59-admin-users-390px.png"), full_page=True)
