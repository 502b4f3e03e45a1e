"""The SDK's workspaces and projects against a real master."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.client import Client
from stalwart.errors import FailedPreconditionError, NotFoundError
from tests.client.support import CONFIG


def test_workspaces_projects_and_moving_experiments(admin: Client, model_dir: Path) -> None:
    ws = admin.create_workspace("sdk-team", default_compute_pool="gpu-pool")
    assert ws.data.default_compute_pool == "gpu-pool"
    assert admin.get_workspace("SDK-TEAM").id == ws.id
    assert "sdk-team" in [w.name for w in admin.list_workspaces()]
    project = ws.create_project("runs", description="first", key="run")
    assert project.key == "RUN"
    assert [p.name for p in ws.list_projects()] == ["runs"]
    assert project.edit(description="second").data.description == "second"
    assert project.add_note("plan", "train") == [{"name": "plan", "contents": "train"}]
    assert project.set_notes([]) == []
    exp = admin.create_experiment(CONFIG, model_dir, activate=False, project_id=project.id)
    assert exp.data.project_id == project.id
    assert exp.data.resource_pool == "gpu-pool"  # the workspace's default compute pool
    with pytest.raises(FailedPreconditionError, match="holds 1 experiment"):
        ws.delete()
    exp.move_to_project("Uncategorized", "Uncategorized")
    assert exp.data.project_id == 1
    ws.unpin()
    assert ws.reload().data.pinned is False
    assert ws.edit(name="sdk-team-2").name == "sdk-team-2"
    project.delete()
    ws.delete()
    with pytest.raises(NotFoundError):
        admin.get_workspace("sdk-team-2")
