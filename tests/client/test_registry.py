"""The SDK's model registry: ``Client.create_model/get_model/list_models``, ``Model`` and
``ModelVersion``, against a real master and agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stalwart.client import Client, Experiment
from stalwart.errors import FailedPreconditionError, NotFoundError


def test_models_and_versions(admin: Client, finished: Experiment, tmp_path: Path) -> None:
    best = finished.top_checkpoint()
    assert best is not None
    model = admin.create_model("sdk-registry", description="tiny", labels=["a"], metadata={"k": 1})
    assert (model.name, model.workspace_id, model.labels) == ("sdk-registry", 1, ["a"])
    assert admin.get_model(model.id).name == admin.get_model("sdk-registry").name == model.name
    assert [m.name for m in admin.list_models(name="registry")] == ["sdk-registry"]
    assert [m.name for m in admin.list_models(labels=["nope"])] == []
    assert model.get_version() is None

    model.add_metadata({"j": 2})
    model.remove_metadata(["k"])
    model.set_labels(["b", "b", "c"])
    assert (model.metadata, model.labels) == ({"j": 2}, ["b", "c"])
    first = model.register_version(best.uuid, name="first", notes="readme")
    assert (first.number, first.name, first.notes) == (1, "first", "readme")
    assert model.num_versions == 1
    second = model.register_version(best.uuid)
    second.set_name("second")
    latest = model.get_version()
    assert latest is not None
    assert (latest.number, latest.name) == (2, "second")
    assert [v.number for v in model.get_versions()] == [1, 2]
    path = latest.checkpoint.download(tmp_path / "download")
    assert json.loads((path / "state.json").read_text()) == {"step": 4}

    second.delete()
    with pytest.raises(NotFoundError, match="version 2 for model"):
        model.get_version(2)
    model.archive()
    with pytest.raises(FailedPreconditionError, match="archived"):
        model.register_version(best.uuid)
    model.unarchive()
    assert model.register_version(best.uuid).number == 3  # 2 is never reused
    model.delete()
    with pytest.raises(NotFoundError, match="model 'sdk-registry' not found"):
        admin.get_model("sdk-registry")
