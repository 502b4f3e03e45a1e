"""The model registry pages (#/models, #/models/NAME) against the real master and agent of the
package (the completed adaptive_asha experiment gives real checkpoints).

An empty registry says so; a model created from the form is listed and found by name and by
label (kept in the hash), archived ones only when asked; its page shows description, labels,
metadata and notes; a checkpoint registered by UUID becomes version 1 (with its trial) and a
wrong UUID is refused with the master's reason; Delete (after confirm) removes a version. A
missing model says so; a user without a role in a model's workspace does not see it, and one who
may see a model is shown the master's refusal when deleting a version someone else registered.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from stalwart.client import Experiment
from stalwart.local import LocalCluster
from tests.ui.conftest import admin_headers, sign_in
from tests.ui.test_org import sign_in_as

if TYPE_CHECKING:
    from playwright.sync_api import Page

OUTSIDER = "models-outsider"
OUTSIDER_PASSWORD = "outsider-pass-1"


def api(url: str, method: str, path: str, body: Any = None) -> Any:
    """Call the API as admin; the parsed answer (any status but 200 fails)."""
    answer = httpx.request(method, f"{url}/api/v1{path}", json=body, headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_models_pages(page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path) -> None:
    from playwright.sync_api import expect

    url = cluster.url
    checkpoints = api(url, "GET", f"/experiments/{asha.id}/checkpoints")["checkpoints"]
    done = [c for c in checkpoints if c["state"] == "STATE_COMPLETED"]
    assert done, checkpoints
    ckpt = done[0]

    sign_in(page, url)
    page.get_by_role("link", name="Models", exact=True).click()
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
    if not api(url, "GET", "/models")["models"]:
        expect(page.locator(".empty")).to_contain_text("No models yet")

    # create from the form; the API holds it
    page.get_by_label("Name", exact=True).fill("ui-mnist")
    page.get_by_label("Description").fill("digits")
    page.get_by_label("Labels (comma-separated)").fill("prod, vision")
    page.get_by_role("button", name="Create model").click()
    expect(page.locator("#toast")).to_contain_text("Created model ui-mnist")
    made = api(url, "GET", "/models/ui-mnist")["model"]
    assert (made["description"], made["labels"]) == ("digits", ["prod", "vision"])
    api(url, "PATCH", "/models/ui-mnist", {"metadata": {"framework": "torch"}, "notes": "# MNIST"})
    api(url, "POST", "/models", {"name": "ui-other", "labels": ["dev"]})
    api(url, "POST", "/models", {"name": "ui-old"})
    api(url, "POST", "/models/ui-old/archive")

    # search by name and by label, in the hash; archived ones on request
    rows = page.locator("#models tbody tr td:nth-child(2)")
    expect(rows).to_contain_text(["ui-other", "ui-mnist"])
    expect(page.locator("#models")).not_to_contain_text("ui-old")
    page.get_by_label("Name contains").fill("MNI")
    expect(rows).to_have_text(["ui-mnist"])
    expect(page).to_have_url(f"{url}/#/models?q=MNI")
    page.get_by_label("Name contains").fill("")
    page.get_by_label("Label", exact=True).fill("dev")
    expect(rows).to_have_text(["ui-other"])
    page.get_by_label("Label", exact=True).fill("")
    page.get_by_label("Show archived").check()
    expect(rows.filter(has_text="ui-old")).to_have_text(["ui-old (archived)"])
    page.get_by_label("Show archived").uncheck()
    page.screenshot(path=str(artifacts / "38-models.png"), full_page=True)

    # the model's page
    page.get_by_role("link", name="ui-mnist").click()
    expect(page.get_by_role("heading", name="Model ui-mnist")).to_be_visible()
    expect(page.locator('dd[data-field="Description"]')).to_have_text("digits")
    expect(page.locator('dd[data-field="Labels"]')).to_have_text("prod, vision")
    expect(page.locator('#model-metadata tr[data-key="framework"] td').nth(1)).to_have_text(
        '"torch"'
    )
    expect(page.locator("#model-notes")).to_have_text("# MNIST")
    expect(page.locator(".empty")).to_contain_text("No versions yet")

    # a wrong UUID is refused with the master's reason; a real checkpoint becomes version 1
    page.get_by_label("Checkpoint UUID").fill("00000000-0000-0000-0000-000000000000")
    page.get_by_role("button", name="Register version").click()
    expect(page.locator("#version-error")).to_contain_text("Could not register the checkpoint")
    page.get_by_label("Checkpoint UUID").fill(ckpt["uuid"])
    page.get_by_label("Version name").fill("first")
    page.get_by_label("Comment").fill("from the UI")
    page.get_by_role("button", name="Register version").click()
    expect(page.locator("#toast")).to_contain_text("Registered version 1 of ui-mnist")
    expect(page.locator("#version-error")).to_have_text("")
    row = page.locator('#versions tr[data-key="1"]')
    expect(row.locator("td").nth(1)).to_have_text("first")
    expect(row.locator("td").nth(2)).to_have_text(ckpt["uuid"])
    trial_id = ckpt["training"]["trialId"]
    expect(row.get_by_role("link", name=f"Trial {trial_id}")).to_have_attribute(
        "href", f"#/trials/{trial_id}"
    )
    (version,) = api(url, "GET", "/models/ui-mnist/versions")["modelVersions"]
    assert (version["checkpoint"]["uuid"], version["comment"]) == (ckpt["uuid"], "from the UI")
    page.screenshot(path=str(artifacts / "39-model.png"), full_page=True)

    # a missing model says so
    page.goto(f"{url}/#/models/nope")
    expect(page.locator("#model-missing")).to_have_text(
        "There is no model “nope” that you can see. All models."
    )

    # delete the version, after confirming
    page.goto(f"{url}/#/models/ui-mnist")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete version 1").click()
    expect(page.locator('#versions tr[data-key="1"]')).to_have_count(0)
    assert api(url, "GET", "/models/ui-mnist/versions")["modelVersions"] == []


def test_models_without_a_role(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """A user without a role in a workspace does not see its model; a member who sees a model
    is shown the master's refusal when deleting a version the admin registered."""
    from playwright.sync_api import expect

    url = cluster.url
    api(
        url,
        "POST",
        "/users",
        {"user": {"username": OUTSIDER, "active": True}, "password": OUTSIDER_PASSWORD},
    )
    private = api(url, "POST", "/workspaces", {"name": "models-private"})["workspace"]
    api(url, "PUT", f"/workspaces/{private['id']}/roles/default", {"role": "none"})
    api(url, "POST", "/models", {"name": "ui-secret", "workspaceId": private["id"]})
    api(url, "POST", "/models", {"name": "ui-shared"})
    checkpoints = api(url, "GET", f"/experiments/{asha.id}/checkpoints")["checkpoints"]
    uuid = next(c["uuid"] for c in checkpoints if c["state"] == "STATE_COMPLETED")
    api(url, "POST", "/models/ui-shared/versions", {"checkpointUuid": uuid})

    sign_in_as(page, url, OUTSIDER, OUTSIDER_PASSWORD)
    page.goto(f"{url}/#/models")
    expect(page.locator("#models tbody tr td:nth-child(2)")).to_contain_text(["ui-shared"])
    expect(page.locator("#models")).not_to_contain_text("ui-secret")
    page.goto(f"{url}/#/models/ui-secret")
    expect(page.locator("#model-missing")).to_contain_text("There is no model “ui-secret”")
    page.goto(f"{url}/#/models/ui-shared")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete version 1").click()
    expect(page.locator("#version-error")).to_contain_text("Not allowed to delete version 1")
    page.screenshot(path=str(artifacts / "40-model-forbidden.png"), full_page=True)
    assert len(api(url, "GET", "/models/ui-shared/versions")["modelVersions"]) == 1
