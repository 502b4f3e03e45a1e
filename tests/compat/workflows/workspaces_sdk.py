"""Workspaces and projects through the official SDK (``determined.experimental``), unmodified.

Run with the det-venv python: ``workspaces_sdk.py MASTER_URL EXPERIMENT_ID``. Logs in as
``admin``, exercises every workspace and project method of 0.38.1's SDK (and the pin bindings,
which only the web UI uses), moves the given experiment in and out, and prints one line
``SDK_RESULT <json>``.
"""

from __future__ import annotations

import json
import sys

from determined.common.api import bindings  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def main() -> None:
    master, exp_id = sys.argv[1], int(sys.argv[2])
    client.login(master=master, user="admin", password="")
    result: dict[str, object] = {}
    ws = client.create_workspace("sdk-space")
    result["created"] = ws.name
    result["got"] = client.get_workspace("sdk-space").id == ws.id
    result["listed"] = sorted(w.name for w in client.list_workspaces())
    project = ws.create_project("sdk-project", description="first")
    result["key"] = project.key
    project.set_name("sdk-renamed")
    project.set_description("second")
    project.set_key("SDK1")
    project.add_note("plan", "train it")
    project.add_note("later", "ship it")
    project.remove_note("plan")
    project.reload()
    result["project"] = {
        "name": project.name,
        "description": project.description,
        "key": project.key,
        "notes": project.notes,
        "workspace_id": project.workspace_id == ws.id,
        "username": project.username,
    }
    result["projects"] = [p.name for p in ws.list_projects()]
    project.archive()
    project.reload()
    result["archived"] = project.archived
    project.unarchive()
    experiment = client.get_experiment(exp_id)
    experiment.move_to_project("sdk-space", "sdk-renamed")
    result["moved_in"] = [e.id for e in project.list_experiments()]
    reloaded = client.get_experiment(exp_id)
    result["experiment_project"] = reloaded.project_id == project.id
    experiment.move_to_project("Uncategorized", "Uncategorized")
    session = client._determined._session  # the SDK's session, for the UI-only pin calls
    bindings.post_UnpinWorkspace(session, id=ws.id)
    result["unpinned"] = bindings.get_GetWorkspace(session, id=ws.id).workspace.pinned
    bindings.post_PinWorkspace(session, id=ws.id)
    result["pinned"] = bindings.get_GetWorkspace(session, id=ws.id).workspace.pinned
    ws.delete_project("sdk-renamed")
    result["after_delete"] = [p.name for p in ws.list_projects()]
    client.delete_workspace("sdk-space")
    result["remaining"] = sorted(w.name for w in client.list_workspaces())
    print("SDK_RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
