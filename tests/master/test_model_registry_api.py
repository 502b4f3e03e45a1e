"""The model registry over REST: models, versions, what a registered checkpoint keeps, and who
may do what (workspace roles). Every test runs on SQLite and on PostgreSQL (row locks)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from stalwart.errors import InvalidArgumentError
from stalwart.master.cluster.checkpoint_gc import _mark_deleted, collect_experiment
from stalwart.master.db.tables import Checkpoint, Experiment, Model, User
from stalwart.master.services.models import VersionFields, refuse_registered, register_version
from stalwart.master.settings import MasterSettings
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import TrialEnv, add_trial, create_experiment, master_state
from tests.master.test_checkpoints_api import add_metrics, report
from tests.master.test_experiments_api import complete
from tests.security.conftest import login, make_user, make_workspace, workspace_of

MODEL_KEYS = (
    "id",
    "name",
    "archived",
    "creationTime",
    "lastUpdatedTime",
    "metadata",
    "numVersions",
    "userId",
    "username",
    "workspaceId",
)
VERSION_KEYS = ("id", "version", "model", "checkpoint", "creationTime", "lastUpdatedTime")


def create_model(
    client: TestClient, headers: dict[str, str], name: str, **extra: Any
) -> dict[str, Any]:
    resp = client.post("/api/v1/models", json={"name": name, **extra}, headers=headers)
    assert resp.status_code == 200, resp.text
    model: dict[str, Any] = resp.json()["model"]
    return model


def register(
    client: TestClient, headers: dict[str, str], model: str | int, uuid: str, **extra: Any
) -> dict[str, Any]:
    resp = client.post(
        f"/api/v1/models/{model}/versions",
        json={"checkpointUuid": uuid, "modelName": str(model), **extra},
        headers=headers,
    )
    assert resp.status_code == 200, resp.text
    version: dict[str, Any] = resp.json()["modelVersion"]
    return version


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> MasterSettings:
    """The master's settings, on each database (overrides the package's SQLite one)."""
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return make_settings(tmp_path / "home", db=db)


@pytest.fixture
def env(client: TestClient, admin: dict[str, str]) -> TrialEnv:
    """A trial with three COMPLETED checkpoints ck-2, ck-4, ck-6 and one in ERROR."""
    state = master_state(client)
    trial = add_trial(state, create_experiment(client, admin))
    for steps in (2, 4, 6):
        report(client, trial, f"ck-{steps}", steps)
    report(client, trial, "ck-err", 7, state="STATE_ERROR")
    return trial


def test_create_describe_list(client: TestClient, admin: dict[str, str]) -> None:
    model = create_model(
        client,
        admin,
        "mnist",
        description="digits",
        labels=["cv", "cv", "prod"],
        metadata={"owner": "ml"},
    )
    for key in MODEL_KEYS:
        assert key in model, key
    assert model["workspaceId"] == 1
    assert model["labels"] == ["cv", "prod"]
    assert model["numVersions"] == 0
    assert model["username"] == "admin"
    by_id = client.get(f"/api/v1/models/{model['id']}", headers=admin).json()["model"]
    by_name = client.get("/api/v1/models/mnist", headers=admin).json()["model"]
    assert by_id == by_name == model
    create_model(client, admin, "resnet 50")  # spaces travel URL-encoded
    assert client.get("/api/v1/models/resnet%2050", headers=admin).status_code == 200
    listed = client.get(
        "/api/v1/models", params={"sortBy": "SORT_BY_NAME", "orderBy": "ORDER_BY_DESC"}
    )
    assert listed.status_code == 401
    body = client.get(
        "/api/v1/models",
        params={"sortBy": "SORT_BY_NAME", "orderBy": "ORDER_BY_DESC"},
        headers=admin,
    ).json()
    assert [m["name"] for m in body["models"]] == ["resnet 50", "mnist"]
    assert body["pagination"]["total"] == 2
    assert body["pagination"]["endIndex"] == 2
    only = client.get("/api/v1/models", params={"labels": "prod"}, headers=admin).json()
    assert [m["name"] for m in only["models"]] == ["mnist"]
    part = client.get("/api/v1/models", params={"name": "MNI"}, headers=admin).json()
    assert [m["name"] for m in part["models"]] == ["mnist"]
    labels = client.get("/api/v1/model/labels", headers=admin).json()
    assert labels == {"labels": ["cv", "prod"]}
    missing = client.get("/api/v1/models/nope", headers=admin)
    assert missing.status_code == 404
    assert "model 'nope' not found" in missing.json()["message"]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("  ", "blank"),
        ("a  b", "excessive spacing"),
        ("a/b", "slashes"),
        ("123", "only numbers"),
    ],
)
def test_model_names_are_checked(
    client: TestClient, admin: dict[str, str], name: str, problem: str
) -> None:
    resp = client.post("/api/v1/models", json={"name": name}, headers=admin)
    assert resp.status_code == 400
    assert problem in resp.json()["message"]


def test_names_are_unique_and_workspaces_must_exist(
    client: TestClient, admin: dict[str, str]
) -> None:
    create_model(client, admin, "m")
    again = client.post("/api/v1/models", json={"name": "m"}, headers=admin)
    assert again.status_code == 409
    assert "already exists" in again.json()["message"]
    nowhere = client.post(
        "/api/v1/models", json={"name": "x", "workspaceName": "nowhere"}, headers=admin
    )
    assert nowhere.status_code == 404
    assert "workspace 'nowhere' not found" in nowhere.json()["message"]


def test_patch_archive_move_delete(client: TestClient, admin: dict[str, str]) -> None:
    team = workspace_of(client, make_workspace(client, "team"))
    model = create_model(client, admin, "m", metadata={"a": 1})
    resp = client.patch(
        "/api/v1/models/m",
        json={"metadata": {"a": 1, "b": 2}, "labels": ["x"], "description": "d", "notes": "n"},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    patched = resp.json()["model"]
    assert (patched["metadata"], patched["labels"]) == ({"a": 1, "b": 2}, ["x"])
    assert (patched["description"], patched["notes"]) == ("d", "n")
    renamed = client.patch(f"/api/v1/models/{model['id']}", json={"name": "m2"}, headers=admin)
    assert renamed.json()["model"]["name"] == "m2"
    assert client.post("/api/v1/models/m2/archive", headers=admin).status_code == 200
    refused = client.patch("/api/v1/models/m2", json={"description": "e"}, headers=admin)
    assert refused.status_code == 400
    assert "archived" in refused.json()["message"]
    assert client.get("/api/v1/models/m2", headers=admin).json()["model"]["archived"] is True
    moved = client.post(
        "/api/v1/models/m2/move", json={"destinationWorkspaceId": team}, headers=admin
    )
    assert moved.status_code == 200, moved.text
    assert client.post("/api/v1/models/m2/unarchive", headers=admin).status_code == 200
    back = client.patch("/api/v1/models/m2", json={"workspaceName": "Uncategorized"}, headers=admin)
    assert back.status_code == 200, back.text
    assert back.json()["model"]["workspaceId"] == 1
    assert client.delete("/api/v1/models/m2", headers=admin).status_code == 200
    assert client.get("/api/v1/models/m2", headers=admin).status_code == 404


def test_versions(client: TestClient, env: TrialEnv, admin: dict[str, str]) -> None:
    add_metrics(master_state(client), env.trial_id, "validation", 4, loss=0.5)
    create_model(client, admin, "m")
    first = register(client, admin, "m", "ck-2", name="first", labels=["a"])
    for key in VERSION_KEYS:
        assert key in first, key
    assert first["version"] == 1
    assert first["checkpoint"]["uuid"] == "ck-2"
    assert first["checkpoint"]["training"]["trialId"] == env.trial_id
    assert first["model"]["numVersions"] == 1
    assert (first["name"], first["labels"], first["username"]) == ("first", ["a"], "admin")
    model_id = first["model"]["id"]
    second = register(client, admin, model_id, "ck-4")  # by id, as `det ... --json` does
    assert second["version"] == 2
    assert second["checkpoint"]["training"]["validationMetrics"]["avgMetrics"] == {"loss": 0.5}
    newest = client.get(
        "/api/v1/models/m/versions",
        params={"limit": 1, "sortBy": "SORT_BY_VERSION", "orderBy": "ORDER_BY_DESC"},
        headers=admin,
    ).json()
    assert [v["version"] for v in newest["modelVersions"]] == [2]
    assert newest["model"]["numVersions"] == 2
    assert newest["pagination"]["total"] == 2
    one = client.get("/api/v1/models/m/versions/1", headers=admin).json()["modelVersion"]
    assert one["checkpoint"]["uuid"] == "ck-2"
    patched = client.patch(
        "/api/v1/models/m/versions/1", json={"name": "n", "notes": "readme"}, headers=admin
    ).json()["modelVersion"]
    assert (patched["name"], patched["notes"], patched["labels"]) == ("n", "readme", ["a"])
    metrics = client.get("/api/v1/models/m/versions/1/metrics", headers=admin)
    assert metrics.json() == {"metrics": []}
    assert client.delete("/api/v1/models/m/versions/2", headers=admin).status_code == 200
    gone = client.get("/api/v1/models/m/versions/2", headers=admin)
    assert gone.status_code == 404
    assert "version 2 for model 'm' not found" in gone.json()["message"]
    assert register(client, admin, "m", "ck-6")["version"] == 3  # 2 is never handed out again


def test_only_completed_known_checkpoints_register(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    create_model(client, admin, "m")
    unknown = client.post(
        "/api/v1/models/m/versions",
        json={"checkpointUuid": "nope", "modelName": "m"},
        headers=admin,
    )
    assert unknown.status_code == 404
    failed = client.post(
        "/api/v1/models/m/versions",
        json={"checkpointUuid": "ck-err", "modelName": "m"},
        headers=admin,
    )
    assert failed.status_code == 400
    assert "must be in a COMPLETED state" in failed.json()["message"]
    client.post("/api/v1/models/m/archive", headers=admin)
    archived = client.post(
        "/api/v1/models/m/versions",
        json={"checkpointUuid": "ck-2", "modelName": "m"},
        headers=admin,
    )
    assert archived.status_code == 400
    assert "archived" in archived.json()["message"]
    task = client.post(
        "/api/v1/models/m/versions",
        json={"checkpointUuid": "ck-2", "modelName": "m"},
        headers=env.headers,
    )
    assert task.status_code == 403  # a task's token does not reach the registry


def test_a_registered_checkpoint_cannot_be_deleted(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    create_model(client, admin, "keeper")
    register(client, admin, "keeper", "ck-2")
    body = {"checkpointUuids": ["ck-2", "ck-4"]}
    refused = client.request("DELETE", "/api/v1/checkpoints", json=body, headers=admin)
    assert refused.status_code == 400
    message = refused.json()["message"]
    assert "ck-2, registered to keeper (model #" in message
    assert "version 1" in message
    patch = {"checkpoints": [{"uuid": "ck-2", "resources": {"resources": {}}}]}
    by_task = client.patch("/api/v1/checkpoints", json=patch, headers=env.headers)
    assert by_task.status_code == 400
    with master_state(client).sessions() as session:
        assert session.get(Checkpoint, "ck-2").state == "COMPLETED"  # type: ignore[union-attr]
        assert session.get(Checkpoint, "ck-4").state == "COMPLETED"  # type: ignore[union-attr]
    complete(client, env.experiment_id)
    exp = client.delete(f"/api/v1/experiments/{env.experiment_id}", headers=admin)
    assert exp.status_code == 400
    assert "registered as model versions" in exp.json()["message"]
    assert client.delete("/api/v1/models/keeper/versions/1", headers=admin).status_code == 200
    freed = client.request("DELETE", "/api/v1/checkpoints", json=body, headers=admin)
    assert freed.status_code == 200, freed.text


def test_gc_keeps_registered_checkpoints(
    client: TestClient, admin: dict[str, str], tmp_path: Path
) -> None:
    storage = tmp_path / "storage"
    config = (
        "entrypoint: python3 train.py\n"
        "searcher:\n  name: single\n  metric: loss\n"
        f"checkpoint_storage:\n  type: shared_fs\n  host_path: {storage}\n"
    )
    state = master_state(client)
    env = add_trial(state, create_experiment(client, admin, config))
    for steps in (2, 4, 6):
        report(client, env, f"gc-{steps}", steps)
        (storage / f"gc-{steps}").mkdir(parents=True)
        (storage / f"gc-{steps}" / "state.json").write_text("{}")
    create_model(client, admin, "kept")
    register(client, admin, "kept", "gc-2")
    complete(client, env.experiment_id)
    assert collect_experiment(state.sessions, env.experiment_id) == 1
    with state.sessions() as session:
        states = {
            c.uuid: c.state
            for c in session.query(Checkpoint).filter_by(experiment_id=env.experiment_id)
        }
        experiment = session.get(Experiment, env.experiment_id)
        assert experiment is not None
        assert experiment.checkpoints_collected
    # the latest (gc-6) stays by policy, gc-2 because it is registered; gc-4 goes
    assert states == {"gc-2": "COMPLETED", "gc-4": "DELETED", "gc-6": "COMPLETED"}
    assert (storage / "gc-2" / "state.json").exists()
    assert not (storage / "gc-4").exists()
    assert (storage / "gc-6").exists()


# --- workspace roles ---


@pytest.fixture
def team(client: TestClient, admin: dict[str, str]) -> dict[str, dict[str, str]]:
    """Workspace ``team`` (default role none): vera viewer, mia and mike members, eddie editor;
    bob has no role. Returns everyone's headers."""
    workspace = workspace_of(client, make_workspace(client, "team"))
    roles = f"/api/v1/workspaces/{workspace}/roles"
    assert client.put(f"{roles}/default", json={"role": "none"}, headers=admin).status_code == 200
    headers = {"admin": admin}
    for name, role in (
        ("vera", "viewer"),
        ("mia", "member"),
        ("mike", "member"),
        ("eddie", "editor"),
        ("bob", None),
    ):
        user_id = make_user(client, admin, name)
        if role is not None:
            put = client.put(f"{roles}/users/{user_id}", json={"role": role}, headers=admin)
            assert put.status_code == 200, put.text
        headers[name] = login(client, name)
    return headers


def test_roles_decide_who_sees_and_changes_models(
    client: TestClient, env: TrialEnv, team: dict[str, dict[str, str]]
) -> None:
    refused = client.post(
        "/api/v1/models", json={"name": "v", "workspaceName": "team"}, headers=team["vera"]
    )
    assert refused.status_code == 403
    assert "cannot create models in workspace 'team'" in refused.json()["message"]
    model = create_model(client, team["mia"], "secret", workspaceName="team")
    create_model(client, team["admin"], "open")  # Uncategorized: everyone is a member
    # bob has no role in team: the model is not listed and not found
    listed = client.get("/api/v1/models", headers=team["bob"]).json()["models"]
    assert [m["name"] for m in listed] == ["open"]
    for path in ("secret", str(model["id"]), "secret/versions"):
        resp = client.get(f"/api/v1/models/{path}", headers=team["bob"])
        assert resp.status_code == 404, path
    assert "secret" not in client.get(f"/api/v1/models/{model['id']}", headers=team["bob"]).text
    # the viewer reads, but changes nothing
    assert client.get("/api/v1/models/secret", headers=team["vera"]).status_code == 200
    denied = client.patch("/api/v1/models/secret", json={"notes": "x"}, headers=team["vera"])
    assert denied.status_code == 403
    assert "viewer" in denied.json()["message"]
    # another member cannot change mia's model; the editor can; mia can
    other = client.patch("/api/v1/models/secret", json={"notes": "x"}, headers=team["mike"])
    assert other.status_code == 403
    assert "the models they created" in other.json()["message"]
    for who in ("eddie", "mia"):
        ok = client.patch("/api/v1/models/secret", json={"notes": who}, headers=team[who])
        assert ok.status_code == 200, ok.text
    register(client, team["mia"], "secret", "ck-2")
    vera_del = client.delete("/api/v1/models/secret/versions/1", headers=team["vera"])
    assert vera_del.status_code == 403
    # bob, outside team, is told a model he cannot see holds the checkpoint, not its name
    with master_state(client).sessions() as session:
        bob = session.scalar(select(User).where(User.username == "bob"))
        assert bob is not None
        with pytest.raises(InvalidArgumentError) as refused_delete:
            refuse_registered(session, bob, ["ck-2"], "deleted")
    assert "ck-2, registered to a model you cannot see" in refused_delete.value.message
    assert "secret" not in refused_delete.value.message
    # moving needs a role that creates models in the destination
    create_model(client, team["vera"], "veras")
    create_model(client, team["bob"], "bobs")
    target = {"destinationWorkspaceId": model["workspaceId"]}
    vera_move = client.post("/api/v1/models/veras/move", json=target, headers=team["vera"])
    assert vera_move.status_code == 403
    bob_move = client.post("/api/v1/models/bobs/move", json=target, headers=team["bob"])
    assert bob_move.status_code == 404  # he cannot see the workspace
    mike_model = create_model(client, team["mike"], "mikes")
    mike_move = client.post("/api/v1/models/mikes/move", json=target, headers=team["mike"])
    assert mike_move.status_code == 200, mike_move.text
    assert mike_model["workspaceId"] == 1
    assert client.delete("/api/v1/models/secret", headers=team["mike"]).status_code == 403
    assert client.delete("/api/v1/models/secret", headers=team["mia"]).status_code == 200


def test_gc_waits_for_a_registration_in_flight_and_keeps_its_checkpoint(
    client: TestClient, env: TrialEnv, admin: dict[str, str], settings: MasterSettings
) -> None:
    """PostgreSQL: a registration holding the checkpoint's row lock makes GC wait, and GC then
    sees the new version (no write skew between "not registered" and "mark DELETED")."""
    if not settings.database_url.startswith("postgresql"):
        pytest.skip("row locks: PostgreSQL (SQLite has a single writer)")
    create_model(client, admin, "racing")
    state = master_state(client)
    registering = state.sessions()
    user = registering.scalar(select(User).where(User.username == "admin"))
    model = registering.scalar(select(Model).where(Model.name == "racing"))
    assert user is not None
    assert model is not None
    register_version(registering, user, model, "ck-2", VersionFields())  # holds the row lock
    gc = threading.Thread(target=_mark_deleted, args=(state.sessions, ["ck-2", "ck-4"]))
    gc.start()
    try:
        deadline = time.monotonic() + 30
        with state.engine.connect() as conn:
            while not conn.execute(
                text("select count(*) from pg_locks where not granted")
            ).scalar():
                assert time.monotonic() < deadline, "GC never waited for the row lock"
                assert gc.is_alive(), "GC finished without waiting"
                time.sleep(0.05)
                conn.rollback()
        registering.commit()
    finally:
        registering.close()
        gc.join(timeout=30)
    with state.sessions() as session:
        assert session.get(Checkpoint, "ck-2").state == "COMPLETED"  # type: ignore[union-attr]
        assert session.get(Checkpoint, "ck-4").state == "DELETED"  # type: ignore[union-attr]
