"""The model registry pages (#/models, #/models/NAME) against the real master and agent of the
package (the completed adaptive_asha experiment gives real checkpoints).

An empty registry says so; a model created from the form is listed and found by name and by
label (kept in the hash), archived ones only when asked; its page shows description, labels,
metadata and notes; a checkpoint registered by UUID becomes version 1 (with its trial) and a
wrong UUID is refused with the master's reason; Delete (after confirm) removes a version. A
missing model says so; a user without a role in a model's workspace does not see it, and one who
may see a model is shown the master's refusal when deleting a version someone else registered,
changing the model, archiving it or editing a version.

Editing: a model's name, description, labels, metadata (key/value rows: values that read as
JSON are kept typed) and notes from its page, a name another model has refused with the
master's reason, a new name moving the page to its new address; a version's name, comment and
notes, labels and metadata; Archive (the page says so, Edit is disabled, the default list hides
it) and Unarchive. Move to another workspace (the page names the new one) and Delete of the
model (after confirm; a dismissed confirm keeps it; then back to the Models list), both refused
with the master's reason for a user who may only see the model. At 390 px the model page with
both forms open does not scroll sideways.
"""

from __future__ import annotations

import time
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


def completed_checkpoint(url: str, asha: Experiment) -> str:
    """The UUID of a COMPLETED checkpoint of the ASHA search."""
    checkpoints = api(url, "GET", f"/experiments/{asha.id}/checkpoints")["checkpoints"]
    return str(next(c["uuid"] for c in checkpoints if c["state"] == "STATE_COMPLETED"))


def test_editing_a_model(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """Edit a model's fields, rename it (a taken name refused), edit a version, archive and
    unarchive; each change checked through the API."""
    from playwright.sync_api import expect

    url = cluster.url
    api(
        url,
        "POST",
        "/models",
        {
            "name": "ui-edit",
            "description": "old",
            "labels": ["a"],
            "metadata": {"framework": "torch", "layers": 3},
            "notes": "first notes",
        },
    )
    api(url, "POST", "/models", {"name": "ui-edit-taken"})
    uuid = completed_checkpoint(url, asha)
    api(url, "POST", "/models/ui-edit/versions", {"checkpointUuid": uuid, "name": "v-one"})

    sign_in(page, url)
    page.goto(f"{url}/#/models/ui-edit")
    expect(page.get_by_role("heading", name="Model ui-edit")).to_be_visible()
    page.get_by_role("button", name="Edit model").click()
    form = page.locator("#model-edit")
    expect(form.get_by_label("Description")).to_have_value("old")
    expect(form.get_by_label("Labels (comma-separated)")).to_have_value("a")
    expect(form.get_by_label("Metadata key 1")).to_have_value("framework")
    expect(form.get_by_label("Metadata value 1")).to_have_value("torch")
    expect(form.get_by_label("Metadata key 2")).to_have_value("layers")
    expect(form.get_by_label("Metadata value 2")).to_have_value("3")
    expect(form.get_by_label("Notes")).to_have_value("first notes")

    form.get_by_label("Description").fill("digits, retrained")
    form.get_by_label("Labels (comma-separated)").fill("prod, vision , v2")
    form.get_by_role("button", name="Remove metadata row 1").click()
    expect(form.get_by_label("Metadata key 1")).to_have_value("layers")
    form.get_by_label("Metadata value 1").fill("4")
    form.get_by_role("button", name="Add a key").click()
    form.get_by_label("Metadata key 2").fill("source")
    form.get_by_label("Metadata value 2").fill("the UI")
    form.get_by_role("button", name="Add a key").click()
    form.get_by_label("Metadata key 3").fill("source")
    form.get_by_label("Metadata value 3").fill("[28, 28]")
    form.get_by_label("Notes").fill("# MNIST\nretrained on more digits")
    # a key given twice is refused in the page
    form.get_by_role("button", name="Save model").click()
    expect(page.locator("#model-edit-error")).to_have_text(
        "The metadata key “source” is given twice."
    )
    form.get_by_label("Metadata key 3").fill("shape")
    page.screenshot(path=str(artifacts / "70-model-edit.png"), full_page=True)
    form.get_by_role("button", name="Save model").click()
    expect(page.locator("#toast")).to_contain_text("Saved model ui-edit")
    expect(page.locator("#model-edit")).to_have_count(0)
    expect(page.locator('dd[data-field="Description"]')).to_have_text("digits, retrained")
    expect(page.locator('dd[data-field="Labels"]')).to_have_text("prod, vision, v2")
    expect(page.locator("#model-metadata tbody tr")).to_have_count(3)
    expect(page.locator('#model-metadata tr[data-key="shape"] td').nth(1)).to_have_text("[28,28]")
    expect(page.locator("#model-notes")).to_have_text("# MNIST\nretrained on more digits")
    held = api(url, "GET", "/models/ui-edit")["model"]
    assert held["description"] == "digits, retrained"
    assert held["labels"] == ["prod", "vision", "v2"]
    assert held["metadata"] == {"layers": 4, "source": "the UI", "shape": [28, 28]}
    assert held["notes"] == "# MNIST\nretrained on more digits"

    # a name another model has: the master's reason; a new one moves the page
    page.get_by_role("button", name="Edit model").click()
    page.locator("#model-edit").get_by_label("Name").fill("ui-edit-taken")
    page.get_by_role("button", name="Save model").click()
    expect(page.locator("#model-edit-error")).to_have_text(
        "Could not change model ui-edit: a model named 'ui-edit-taken' already exists: "
        "choose another name"
    )
    page.locator("#model-edit").get_by_label("Name").fill("ui-edited")
    page.get_by_role("button", name="Save model").click()
    expect(page).to_have_url(f"{url}/#/models/ui-edited")
    expect(page.get_by_role("heading", name="Model ui-edited")).to_be_visible()
    expect(page.locator('#versions tr[data-key="1"] td').nth(1)).to_have_text("v-one")
    assert api(url, "GET", "/models/ui-edited")["model"]["metadata"]["layers"] == 4
    gone = httpx.get(f"{url}/api/v1/models/ui-edit", headers=admin_headers(url))
    assert gone.status_code == 404, gone.text

    # a version's name, comment and notes
    page.get_by_role("button", name="Edit version 1").click()
    version_form = page.locator("#version-edit")
    expect(version_form.get_by_label("Name")).to_have_value("v-one")
    version_form.get_by_label("Name").fill("best")
    version_form.get_by_label("Comment").fill("picked by hand")
    version_form.get_by_label("Notes").fill("lowest validation loss")
    version_form.get_by_role("button", name="Save version").click()
    expect(page.locator("#toast")).to_contain_text("Saved version 1 of ui-edited")
    expect(page.locator("#version-edit")).to_have_count(0)
    row = page.locator('#versions tr[data-key="1"] td')
    expect(row.nth(1)).to_have_text("best")
    expect(row.nth(4)).to_have_text("picked by hand")
    expect(row.nth(6)).to_have_text("lowest validation loss")
    (version,) = api(url, "GET", "/models/ui-edited/versions")["modelVersions"]
    assert (version["name"], version["comment"], version["notes"]) == (
        "best",
        "picked by hand",
        "lowest validation loss",
    )

    # a version's labels and metadata (typed like the model's)
    page.get_by_role("button", name="Edit version 1").click()
    version_form = page.locator("#version-edit")
    expect(version_form.get_by_label("Labels (comma-separated)")).to_have_value("")
    version_form.get_by_label("Labels (comma-separated)").fill("candidate, v2 ")
    version_form.get_by_role("button", name="Add a key").click()
    version_form.get_by_label("Metadata key 1").fill("accuracy")
    version_form.get_by_label("Metadata value 1").fill("0.98")
    version_form.get_by_role("button", name="Add a key").click()
    version_form.get_by_label("Metadata key 2").fill("accuracy")
    version_form.get_by_label("Metadata value 2").fill("by hand")
    version_form.get_by_role("button", name="Save version").click()
    expect(page.locator("#version-edit-error")).to_have_text(
        "The metadata key “accuracy” is given twice."
    )
    version_form.get_by_label("Metadata key 2").fill("picked")
    page.screenshot(path=str(artifacts / "90-model-version-metadata.png"), full_page=True)
    version_form.get_by_role("button", name="Save version").click()
    expect(page.locator("#toast")).to_contain_text("Saved version 1 of ui-edited")
    expect(page.locator("#version-edit")).to_have_count(0)
    expect(row.nth(5)).to_have_text("candidate, v2")
    expect(row.nth(7)).to_have_text('accuracy: 0.98, picked: "by hand"')
    (version,) = api(url, "GET", "/models/ui-edited/versions")["modelVersions"]
    assert version["labels"] == ["candidate", "v2"]
    assert version["metadata"] == {"accuracy": 0.98, "picked": "by hand"}
    assert version["notes"] == "lowest validation loss"
    # opened again, the form holds them; removing a row removes the key
    page.get_by_role("button", name="Edit version 1").click()
    expect(version_form.get_by_label("Metadata key 2")).to_have_value("picked")
    expect(version_form.get_by_label("Metadata value 2")).to_have_value("by hand")
    version_form.get_by_role("button", name="Remove metadata row 2").click()
    version_form.get_by_role("button", name="Save version").click()
    expect(row.nth(7)).to_have_text("accuracy: 0.98")
    assert api(url, "GET", "/models/ui-edited/versions/1")["modelVersion"]["metadata"] == {
        "accuracy": 0.98
    }

    # archive: said on the page, no editing, hidden from the default list; then unarchive
    page.get_by_role("button", name="Archive model").click()
    expect(page.locator("#toast")).to_contain_text("Archived model ui-edited")
    expect(page.get_by_role("heading", name="Model ui-edited (archived)")).to_be_visible()
    expect(page.locator("#model-archived")).to_contain_text("Archived")
    expect(page.get_by_role("button", name="Edit model")).to_be_disabled()
    assert api(url, "GET", "/models/ui-edited")["model"]["archived"] is True
    page.screenshot(path=str(artifacts / "71-model-archived.png"), full_page=True)
    page.goto(f"{url}/#/models")
    names = page.locator("#models tbody tr td:nth-child(2)")
    expect(names).to_contain_text(["ui-edit-taken"])
    expect(page.locator("#models")).not_to_contain_text("ui-edited")
    page.get_by_label("Show archived").check()
    expect(names.filter(has_text="ui-edited")).to_have_text(["ui-edited (archived)"])
    names.get_by_role("link", name="ui-edited").click()
    page.get_by_role("button", name="Unarchive model").click()
    expect(page.locator("#toast")).to_contain_text("Unarchived model ui-edited")
    expect(page.locator("#model-archived")).to_have_count(0)
    expect(page.get_by_role("button", name="Edit model")).to_be_enabled()
    assert api(url, "GET", "/models/ui-edited")["model"]["archived"] is False


def test_moving_and_deleting_a_model(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """Move a model to another workspace (the page and the API say where it is); Delete it: a
    dismissed confirm keeps it, an accepted one deletes it and its versions and goes back to
    the Models list."""
    from playwright.sync_api import expect

    url = cluster.url
    team = api(url, "POST", "/workspaces", {"name": "models-team"})["workspace"]
    made = api(url, "POST", "/models", {"name": "ui-movable", "description": "to move"})["model"]
    home = made["workspaceId"]
    assert home != team["id"]
    uuid = completed_checkpoint(url, asha)
    api(url, "POST", "/models/ui-movable/versions", {"checkpointUuid": uuid})

    sign_in(page, url)
    page.goto(f"{url}/#/models/ui-movable")
    expect(page.get_by_role("heading", name="Model ui-movable")).to_be_visible()
    move_to = page.get_by_label("Move to workspace")
    expect(page.get_by_role("button", name="Move model")).to_be_disabled()
    expect(move_to.locator("option", has_text="models-team")).to_have_count(1)
    move_to.select_option(label="models-team")
    page.get_by_role("button", name="Move model").click()
    expect(page.locator("#toast")).to_contain_text(
        "Moved model ui-movable to workspace models-team"
    )
    expect(page.locator('dd[data-field="Workspace"]')).to_have_text("models-team")
    # the workspace it is in is no longer offered
    expect(move_to.locator("option", has_text="models-team")).to_have_count(0)
    assert api(url, "GET", "/models/ui-movable")["model"]["workspaceId"] == team["id"]
    page.screenshot(path=str(artifacts / "91-model-moved.png"), full_page=True)

    # delete: dismissed keeps it; accepted deletes it and goes back to the list
    messages: list[str] = []

    def dismiss(dialog: Any) -> None:
        messages.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.get_by_role("button", name="Delete model").click()
    deadline = time.monotonic() + 10
    while not messages and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # lets the dialog handler run
    assert messages == ["Delete model ui-movable and its 1 version? Their checkpoints stay."]
    assert api(url, "GET", "/models/ui-movable")["model"]["name"] == "ui-movable"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete model").click()
    expect(page.locator("#toast")).to_contain_text("Deleted model ui-movable")
    expect(page).to_have_url(f"{url}/#/models")
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
    expect(page.locator("#models")).not_to_contain_text("ui-movable")
    gone = httpx.get(f"{url}/api/v1/models/ui-movable", headers=admin_headers(url))
    assert gone.status_code == 404, gone.text
    # its checkpoint stays
    held = api(url, "GET", f"/checkpoints/{uuid}")["checkpoint"]
    assert held["state"] == "STATE_COMPLETED"


def test_the_model_page_fits_a_phone(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """At 390 px the model page, with its edit form and a version's form open, does not scroll
    sideways (the versions table scrolls in its own box)."""
    from playwright.sync_api import expect

    url = cluster.url
    if httpx.get(f"{url}/api/v1/models/ui-phone", headers=admin_headers(url)).status_code == 404:
        api(
            url,
            "POST",
            "/models",
            {
                "name": "ui-phone",
                "description": "a model looked at on a phone",
                "labels": ["mobile", "small"],
                "metadata": {"framework": "torch", "input_shape": [1, 28, 28]},
                "notes": "Notes that are long enough to wrap on a narrow screen, once or twice.",
            },
        )
        uuid = completed_checkpoint(url, asha)
        api(url, "POST", "/models/ui-phone/versions", {"checkpointUuid": uuid, "name": "one"})
    page.set_viewport_size({"width": 390, "height": 900})
    sign_in(page, url)
    page.goto(f"{url}/#/models/ui-phone")
    expect(page.locator('#versions tr[data-key="1"]')).to_be_visible()
    page.get_by_role("button", name="Edit model").click()
    page.get_by_role("button", name="Edit version 1").click()
    expect(page.locator("#model-edit")).to_be_visible()
    expect(page.locator("#version-edit")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the model page is {width} px wide"
    page.screenshot(path=str(artifacts / "72-model-390px.png"), full_page=True)


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

    # changing the model, archiving it or editing a version: the master's refusal
    page.get_by_role("button", name="Edit model").click()
    page.locator("#model-edit").get_by_label("Description").fill("not mine")
    page.get_by_role("button", name="Save model").click()
    expect(page.locator("#model-edit-error")).to_contain_text(
        f"Not allowed to change model ui-shared: user {OUTSIDER} cannot change model 'ui-shared'"
    )
    page.get_by_role("button", name="Archive model").click()
    expect(page.locator("#model-error")).to_contain_text(
        f"Not allowed to archive model ui-shared: user {OUTSIDER} cannot change model"
    )
    page.get_by_role("button", name="Edit version 1").click()
    page.locator("#version-edit").get_by_label("Notes").fill("not mine either")
    page.get_by_role("button", name="Save version").click()
    expect(page.locator("#version-edit-error")).to_contain_text("Not allowed to change version 1:")

    # moving or deleting the model: the master's refusal, and it stays where it is
    open_ws = api(url, "POST", "/workspaces", {"name": "models-open"})["workspace"]
    page.reload()
    expect(page.get_by_role("heading", name="Model ui-shared")).to_be_visible()
    page.get_by_label("Move to workspace").select_option(label="models-open")
    page.get_by_role("button", name="Move model").click()
    expect(page.locator("#model-error")).to_contain_text(
        f"Not allowed to move model ui-shared: user {OUTSIDER} cannot change model"
    )
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete model").click()
    expect(page.locator("#model-error")).to_contain_text(
        f"Not allowed to delete model ui-shared: user {OUTSIDER} cannot change model"
    )
    expect(page).to_have_url(f"{url}/#/models/ui-shared")
    page.screenshot(path=str(artifacts / "92-model-move-refused.png"), full_page=True)
    held = api(url, "GET", "/models/ui-shared")["model"]
    assert held["workspaceId"] != open_ws["id"]
    assert (held["description"], held["archived"]) == ("", False)
    assert api(url, "GET", "/models/ui-shared/versions/1")["modelVersion"]["notes"] == ""
