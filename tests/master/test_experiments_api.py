"""Experiments API: list, get, state actions, archive, delete, model definition, best metric."""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Experiment,
    MetricReport,
    Task,
    Trial,
    utcnow,
)
from stalwart.master.services import experiments as svc
from stalwart.master.services.tasks import create_trial, start_allocation
from stalwart.master.state import MasterState, Notifier, allocation_key
from stalwart.master.transitions import set_allocation_state, set_experiment_state
from tests.master.conftest import login
from tests.master.test_experiment_create import file_entry

CONFIG = """\
name: {name}
entrypoint: python3 train.py
labels: {labels}
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
  smaller_is_better: {smaller}
"""

EXPERIMENT_KEYS = (
    "id",
    "name",
    "state",
    "archived",
    "config",
    "jobId",
    "numTrials",
    "originalConfig",
    "projectId",
    "projectOwnerId",
    "searcherType",
    "startTime",
    "username",
)
TRIAL_KEYS = (
    "id",
    "experimentId",
    "hparams",
    "restarts",
    "startTime",
    "state",
    "totalBatchesProcessed",
)


def master(client: TestClient) -> MasterState:
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


def new_experiment(
    client: TestClient,
    headers: dict[str, str],
    *,
    name: str = "exp",
    labels: str = "[]",
    smaller: bool = True,
    activate: bool = True,
) -> int:
    """Create an experiment through the API; return its id."""
    resp = client.post(
        "/api/v1/experiments",
        json={
            "activate": activate,
            "config": CONFIG.format(name=name, labels=labels, smaller=str(smaller).lower()),
            "modelDefinition": [file_entry("train.py", b"print('hi')\n")],
            "parentId": None,
            "projectId": None,
            "template": None,
            "validateOnly": False,
        },
        headers=headers,
    )
    assert resp.status_code == 200, resp.text
    return int(resp.json()["experiment"]["id"])


def add_trial(
    client: TestClient, experiment_id: int, *, allocation: str | None = None
) -> tuple[int, int, str | None, str | None]:
    """A trial of the experiment; with ``allocation``, a live allocation in that state.

    Returns ``(trial id, run id, allocation token, allocation id)``.
    """
    with master(client).sessions() as session:
        exp = session.get(Experiment, experiment_id)
        assert exp is not None
        trial = create_trial(session, exp, hparams={"lr": 0.1}, seed=1)
        token = alloc_id = None
        if allocation is not None:
            alloc, token = start_allocation(session, trial.task_id, slots=1)
            set_allocation_state(session, alloc, allocation)
            alloc_id = alloc.id
        session.commit()
        return trial.id, trial.run_id, token, alloc_id


def set_state(client: TestClient, experiment_id: int, *states: str) -> None:
    """Walk an experiment through ``states`` (test setup through the one door)."""
    with master(client).sessions() as session:
        exp = session.get(Experiment, experiment_id)
        assert exp is not None
        for state in states:
            set_experiment_state(session, exp, state)
        session.commit()


def complete(client: TestClient, experiment_id: int) -> None:
    set_state(client, experiment_id, "STOPPING_COMPLETED", "COMPLETED")


def report(
    client: TestClient,
    headers: dict[str, str],
    trial_id: int,
    run_id: int,
    group: str,
    steps: int,
    metrics: dict[str, Any],
) -> Any:
    """Post a metrics report the way the harness does (no Content-Type)."""
    import json

    body = {
        "group": group,
        "metrics": {
            "metrics": {"avgMetrics": metrics, "batchMetrics": None},
            "trialId": trial_id,
            "trialRunId": run_id,
            "stepsCompleted": steps,
            "reportTime": None,
        },
    }
    return client.post(
        f"/api/v1/trials/{trial_id}/metrics", content=json.dumps(body), headers=headers
    )


def row(client: TestClient, model: Any, key: Any) -> Any:
    with master(client).sessions() as session:
        return session.get(model, key)


# --- list ------------------------------------------------------------------------------------


def test_list_has_required_keys_and_pagination(client: TestClient, admin: dict[str, str]) -> None:
    ids = [new_experiment(client, admin, name=f"e{i}") for i in range(3)]
    add_trial(client, ids[0])
    body = client.get("/api/v1/experiments", headers=admin).json()
    assert body["pagination"] == {
        "offset": 0,
        "limit": 0,
        "startIndex": 0,
        "endIndex": 3,
        "total": 3,
    }
    for exp in body["experiments"]:
        for key in EXPERIMENT_KEYS:
            assert key in exp, key
        assert exp["username"] == "admin"
        assert exp["state"] == "STATE_QUEUED"  # ACTIVE with nothing running, as Determined
    assert [e["id"] for e in body["experiments"]] == ids
    assert body["experiments"][0]["numTrials"] == 1
    assert body["experiments"][1]["numTrials"] == 0


def test_list_pages(client: TestClient, admin: dict[str, str]) -> None:
    ids = [new_experiment(client, admin, name=f"e{i}") for i in range(5)]
    page = client.get("/api/v1/experiments?limit=2&offset=2", headers=admin).json()
    assert [e["id"] for e in page["experiments"]] == ids[2:4]
    assert page["pagination"]["startIndex"] == 2
    assert page["pagination"]["endIndex"] == 4
    assert page["pagination"]["total"] == 5
    tail = client.get("/api/v1/experiments?offset=-2", headers=admin).json()
    assert [e["id"] for e in tail["experiments"]] == ids[3:]
    beyond = client.get("/api/v1/experiments?offset=10", headers=admin).json()
    assert beyond["experiments"] == []
    assert beyond["pagination"]["endIndex"] == 5


def test_list_filters(client: TestClient, admin: dict[str, str]) -> None:
    user = login(client, "determined")
    a = new_experiment(client, admin, name="alpha run", labels="[vision, big]")
    b = new_experiment(client, user, name="beta", labels="[vision]", activate=False)
    c = new_experiment(client, admin, name="gamma")
    complete(client, c)
    client.post(f"/api/v1/experiments/{c}/archive", headers=admin)

    def ids(query: str) -> list[int]:
        resp = client.get(f"/api/v1/experiments?{query}", headers=admin)
        assert resp.status_code == 200, resp.text
        return [e["id"] for e in resp.json()["experiments"]]

    assert ids("users=determined") == [b]
    assert ids("users=admin&users=determined&archived=false") == [a, b]
    assert ids("userIds=1") == [a, c]
    assert ids("archived=true") == [c]
    assert ids("states=STATE_PAUSED") == [b]
    assert ids("states=STATE_ACTIVE&states=STATE_COMPLETED") == [a, c]
    assert ids("states=STATE_RUNNING") == [a]  # substates of ACTIVE filter as ACTIVE
    assert ids("name=ALPHA") == [a]
    assert ids("labels=vision") == [a, b]
    assert ids("labels=vision&labels=big") == [a]
    assert ids("labels=vis") == []
    assert ids(f"experimentIdFilter.incl={a}&experimentIdFilter.incl={c}") == [a, c]
    assert ids(f"experimentIdFilter.gt={a}") == [b, c]
    assert ids(f"experimentIdFilter.notIn={b}") == [a, c]
    assert ids("projectId=1") == [a, b, c]
    assert client.get("/api/v1/experiments?states=STATE_BOGUS", headers=admin).status_code == 400


def test_list_sorting(client: TestClient, admin: dict[str, str]) -> None:
    b = new_experiment(client, admin, name="b")
    a = new_experiment(client, admin, name="a")
    c = new_experiment(client, admin, name="c")
    add_trial(client, c)
    add_trial(client, c)

    def ids(query: str) -> list[int]:
        resp = client.get(f"/api/v1/experiments?{query}", headers=admin)
        assert resp.status_code == 200, resp.text
        return [e["id"] for e in resp.json()["experiments"]]

    assert ids("sortBy=SORT_BY_NAME") == [a, b, c]
    assert ids("sortBy=SORT_BY_NAME&orderBy=ORDER_BY_DESC") == [c, b, a]
    assert ids("sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC") == [c, a, b]
    assert ids("sortBy=SORT_BY_NUM_TRIALS&orderBy=ORDER_BY_DESC") == [c, a, b]
    assert ids("sortBy=SORT_BY_START_TIME") == [b, a, c]
    assert ids("sortBy=SORT_BY_END_TIME") == [b, a, c]
    resp = client.get("/api/v1/experiments?sortBy=SORT_BY_NOPE", headers=admin)
    assert resp.status_code == 400


def test_list_needs_credentials(client: TestClient) -> None:
    assert client.get("/api/v1/experiments").status_code == 401


# --- get --------------------------------------------------------------------------------------


def test_get_one(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    t1, *_ = add_trial(client, exp_id, allocation="RUNNING")
    t2, *_ = add_trial(client, exp_id)
    body = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()
    exp = body["experiment"]
    for key in EXPERIMENT_KEYS:
        assert key in exp, key
    assert exp["state"] == "STATE_RUNNING"
    assert exp["trialIds"] == [t1, t2]
    assert exp["numTrials"] == 2
    assert body["config"]["searcher"]["metric"] == "loss"
    assert body["jobSummary"] == {"state": "STATE_SCHEDULED", "jobsAhead": 0}
    assert exp["searcherMetric"] == "loss"


def test_get_paused_has_no_job_summary(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin, activate=False)
    body = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()
    assert body["experiment"]["state"] == "STATE_PAUSED"
    assert body.get("jobSummary") is None


def test_get_unknown_is_404(client: TestClient, admin: dict[str, str]) -> None:
    resp = client.get("/api/v1/experiments/999", headers=admin)
    assert resp.status_code == 404
    assert "experiment 999 not found" in resp.json()["message"]


def test_model_def(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    body = client.get(f"/api/v1/experiments/{exp_id}/model_def", headers=admin).json()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(body["b64Tgz"]))) as tar:
        member = tar.extractfile("train.py")
        assert member is not None
        assert member.read() == b"print('hi')\n"
    assert client.get("/api/v1/experiments/77/model_def", headers=admin).status_code == 404


def test_a_fork_without_files_runs_its_parents_model_definition(
    client: TestClient, admin: dict[str, str]
) -> None:
    """The web UI's Fork sends the edited config and ``parentId`` only: the new experiment gets
    the parent's files and says where it came from; an unknown parent is 404."""
    parent = new_experiment(client, admin)
    fork = {
        "activate": False,
        "config": CONFIG.format(name="forked", labels="[]", smaller="true"),
        "parentId": parent,
    }
    resp = client.post("/api/v1/experiments", json=fork, headers=admin)
    assert resp.status_code == 200, resp.text
    child = resp.json()["experiment"]
    assert (child["name"], child["forkedFrom"]) == ("forked", parent)
    body = client.get(f"/api/v1/experiments/{child['id']}/model_def", headers=admin).json()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(body["b64Tgz"]))) as tar:
        member = tar.extractfile("train.py")
        assert member is not None
        assert member.read() == b"print('hi')\n"
    missing = client.post("/api/v1/experiments", json={**fork, "parentId": 999}, headers=admin)
    assert missing.status_code == 404
    assert "experiment 999 (the one to fork) not found" in missing.json()["message"]


# --- state actions --------------------------------------------------------------------------


def test_pause_preempts_started_allocations(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    running, _, _, running_alloc = add_trial(client, exp_id, allocation="RUNNING")
    queued, _, _, queued_alloc = add_trial(client, exp_id, allocation="PENDING")
    resp = client.post(f"/api/v1/experiments/{exp_id}/pause", headers=admin)
    assert resp.status_code == 200
    assert resp.json() == {}
    assert row(client, Experiment, exp_id).state == "PAUSED"
    assert row(client, Trial, running).state == "PAUSED"
    assert row(client, Trial, queued).state == "PAUSED"
    started = row(client, Allocation, running_alloc)
    assert started.preempt_requested
    assert started.state == "RUNNING"
    assert row(client, Allocation, queued_alloc).state == "TERMINATED"
    # again: a no-op
    assert client.post(f"/api/v1/experiments/{exp_id}/pause", headers=admin).status_code == 200


def test_activate_after_pause(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin, activate=False)
    trial, *_ = add_trial(client, exp_id)
    with master(client).sessions() as session:
        t = session.get(Trial, trial)
        assert t is not None
        t.state = "PAUSED"  # a trial of a paused experiment (setup)
        session.commit()
    assert client.post(f"/api/v1/experiments/{exp_id}/activate", headers=admin).status_code == 200
    assert row(client, Experiment, exp_id).state == "ACTIVE"
    assert row(client, Trial, trial).state == "ACTIVE"
    assert client.post(f"/api/v1/experiments/{exp_id}/activate", headers=admin).status_code == 200


def test_impossible_actions_are_400_naming_the_state(
    client: TestClient, admin: dict[str, str]
) -> None:
    exp_id = new_experiment(client, admin)
    complete(client, exp_id)
    for action in ("pause", "activate"):
        resp = client.post(f"/api/v1/experiments/{exp_id}/{action}", headers=admin)
        assert resp.status_code == 400, action
        assert "STATE_COMPLETED" in resp.json()["message"]
    # cancel and kill of a finished experiment are no-ops, as in Determined
    for action in ("cancel", "kill"):
        assert (
            client.post(f"/api/v1/experiments/{exp_id}/{action}", headers=admin).status_code == 200
        )
    assert row(client, Experiment, exp_id).state == "COMPLETED"


def test_cancel_without_running_allocations_ends_at_once(
    client: TestClient, admin: dict[str, str]
) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, _, alloc = add_trial(client, exp_id, allocation="WAITING")
    assert client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=admin).status_code == 200
    assert row(client, Experiment, exp_id).state == "CANCELED"
    assert row(client, Experiment, exp_id).end_time is not None
    assert row(client, Trial, trial).state == "CANCELED"
    assert row(client, Allocation, alloc).state == "TERMINATED"


def test_cancel_preempts_then_settles(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, _, alloc = add_trial(client, exp_id, allocation="RUNNING")
    assert client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=admin).status_code == 200
    assert row(client, Experiment, exp_id).state == "STOPPING_CANCELED"
    assert row(client, Trial, trial).state == "STOPPING_CANCELED"
    assert row(client, Allocation, alloc).preempt_requested
    assert client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=admin).status_code == 200
    # the allocation exits: the scheduler's calls settle the trial and the experiment
    with master(client).sessions() as session:
        a = session.get(Allocation, alloc)
        t = session.get(Trial, trial)
        e = session.get(Experiment, exp_id)
        assert a is not None
        assert t is not None
        assert e is not None
        set_allocation_state(session, a, "TERMINATED")
        assert svc.settle_trial(session, t)
        assert svc.settle_experiment(session, e)
        session.commit()
    assert row(client, Experiment, exp_id).state == "CANCELED"
    assert row(client, Trial, trial).state == "CANCELED"


def test_kill_terminates_allocations(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, _, alloc = add_trial(client, exp_id, allocation="RUNNING")
    idle, *_ = add_trial(client, exp_id)
    assert client.post(f"/api/v1/experiments/{exp_id}/kill", headers=admin).status_code == 200
    assert row(client, Experiment, exp_id).state == "STOPPING_KILLED"
    assert row(client, Trial, trial).state == "STOPPING_KILLED"
    assert row(client, Trial, idle).state == "CANCELED"
    killed = row(client, Allocation, alloc)
    assert killed.state == "TERMINATING"
    assert killed.preempt_requested
    assert client.post(f"/api/v1/experiments/{exp_id}/kill", headers=admin).status_code == 200


def test_kill_after_cancel_is_more_severe(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, _, alloc = add_trial(client, exp_id, allocation="RUNNING")
    client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=admin)
    client.post(f"/api/v1/experiments/{exp_id}/kill", headers=admin)
    assert row(client, Experiment, exp_id).state == "STOPPING_KILLED"
    assert row(client, Trial, trial).state == "STOPPING_KILLED"
    assert row(client, Allocation, alloc).state == "TERMINATING"


def test_actions_on_unknown_experiment_are_404(client: TestClient, admin: dict[str, str]) -> None:
    for action in ("pause", "activate", "cancel", "kill", "archive", "unarchive"):
        assert client.post(f"/api/v1/experiments/9/{action}", headers=admin).status_code == 404


def test_actions_need_credentials(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    for action in ("pause", "activate", "cancel", "kill", "archive", "unarchive"):
        assert client.post(f"/api/v1/experiments/{exp_id}/{action}").status_code == 401
    assert client.delete(f"/api/v1/experiments/{exp_id}").status_code == 401


def test_deliver_wakes_long_polls() -> None:
    async def scenario() -> bool:
        notifier = Notifier()
        notifier.bind(asyncio.get_running_loop())
        waiter = asyncio.create_task(notifier.wait(allocation_key("1.x.1"), timeout=5))
        await asyncio.sleep(0)
        svc.deliver(notifier, svc.Signals(preempt={"1.x.1"}))
        return await waiter

    assert asyncio.run(scenario())


# --- archive ----------------------------------------------------------------------------------


def test_archive_rules(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    resp = client.post(f"/api/v1/experiments/{exp_id}/archive", headers=admin)
    assert resp.status_code == 400
    assert "not in terminal state" in resp.json()["message"]
    complete(client, exp_id)
    assert client.post(f"/api/v1/experiments/{exp_id}/archive", headers=admin).status_code == 200
    exp = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    assert exp["archived"] is True
    again = client.post(f"/api/v1/experiments/{exp_id}/archive", headers=admin)
    assert again.status_code == 400
    assert "already archived" in again.json()["message"]
    edit = client.post(f"/api/v1/experiments/{exp_id}/kill", headers=admin)
    assert edit.status_code == 400
    assert "archived" in edit.json()["message"]
    assert client.post(f"/api/v1/experiments/{exp_id}/unarchive", headers=admin).status_code == 200
    resp = client.post(f"/api/v1/experiments/{exp_id}/unarchive", headers=admin)
    assert resp.status_code == 400
    assert "not archived" in resp.json()["message"]


# --- delete -----------------------------------------------------------------------------------


def test_delete_only_terminal(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    resp = client.delete(f"/api/v1/experiments/{exp_id}", headers=admin)
    assert resp.status_code == 400
    assert "cannot delete experiment in STATE_ACTIVE state" in resp.json()["message"]


def test_delete_removes_everything(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    other = new_experiment(client, admin)
    trial, run, token, alloc = add_trial(client, exp_id, allocation="RUNNING")
    kept, kept_run, *_ = add_trial(client, other)
    task = {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}
    assert report(client, task, trial, run, "training", 10, {"loss": 1}).status_code == 200
    assert report(client, admin, kept, kept_run, "training", 10, {"loss": 1}).status_code == 200
    with master(client).sessions() as session:
        session.add(
            Checkpoint(
                uuid="c1",
                trial_id=trial,
                experiment_id=exp_id,
                state="COMPLETED",
                report_time=utcnow(),
                steps_completed=10,
            )
        )
        a = session.get(Allocation, alloc)
        assert a is not None
        set_allocation_state(session, a, "TERMINATED")
        session.commit()
    complete(client, exp_id)
    client.post(f"/api/v1/experiments/{exp_id}/archive", headers=admin)  # archived: deletable
    assert client.delete(f"/api/v1/experiments/{exp_id}", headers=admin).status_code == 200
    assert client.get(f"/api/v1/experiments/{exp_id}", headers=admin).status_code == 404
    with master(client).sessions() as session:
        assert session.scalar(select(func.count()).select_from(Trial)) == 1
        assert session.scalar(select(func.count()).select_from(Task)) == 1
        assert session.scalar(select(func.count()).select_from(Allocation)) == 0
        assert session.scalar(select(func.count()).select_from(Checkpoint)) == 0
        assert session.scalar(select(func.count()).select_from(MetricReport)) == 1
    assert client.get(f"/api/v1/experiments/{other}", headers=admin).status_code == 200


def test_delete_is_for_owner_or_admin(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    complete(client, exp_id)
    user = login(client, "determined")
    resp = client.delete(f"/api/v1/experiments/{exp_id}", headers=user)
    assert resp.status_code == 403
    own = new_experiment(client, user)
    complete(client, own)
    assert client.delete(f"/api/v1/experiments/{own}", headers=user).status_code == 200
    assert client.delete("/api/v1/experiments/999", headers=admin).status_code == 404


# --- best searcher metric ---------------------------------------------------------------------


@pytest.mark.parametrize(("smaller", "best"), [(True, 0.2), (False, 0.9)])
def test_best_searcher_validation_metric(
    client: TestClient, admin: dict[str, str], smaller: bool, best: float
) -> None:
    exp_id = new_experiment(client, admin, smaller=smaller)
    url = f"/api/v1/experiments/{exp_id}/searcher/best_searcher_validation_metric"
    assert client.get(url, headers=admin).status_code == 404  # none yet: the harness reads None
    t1, r1, *_ = add_trial(client, exp_id)
    t2, r2, *_ = add_trial(client, exp_id)
    for trial, run, value in ((t1, r1, 0.5), (t1, r1, 0.2), (t2, r2, 0.9), (t2, r2, "NaN")):
        assert (
            report(client, admin, trial, run, "validation", 10, {"loss": value}).status_code == 200
        )
    assert report(client, admin, t2, r2, "training", 20, {"loss": 0.01}).status_code == 200
    assert client.get(url, headers=admin).json() == {"metric": best}


# --- experiment trials ------------------------------------------------------------------------


def test_experiment_trials(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    first, *_ = add_trial(client, exp_id, allocation="RUNNING")
    second, *_ = add_trial(client, exp_id, allocation="PULLING")
    third, *_ = add_trial(client, exp_id)
    body = client.get(f"/api/v1/experiments/{exp_id}/trials", headers=admin).json()
    assert body["pagination"]["total"] == 3
    assert body["pagination"]["endIndex"] == 3
    for trial in body["trials"]:
        for key in TRIAL_KEYS:
            assert key in trial, key
    states = {t["id"]: t["state"] for t in body["trials"]}
    assert states == {first: "STATE_RUNNING", second: "STATE_PULLING", third: "STATE_QUEUED"}
    desc = client.get(
        f"/api/v1/experiments/{exp_id}/trials?sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC&limit=2",
        headers=admin,
    ).json()
    assert [t["id"] for t in desc["trials"]] == [third, second]
    assert desc["pagination"]["endIndex"] == 2
    client.post(f"/api/v1/trials/{third}/kill", headers=admin)
    canceled = client.get(
        f"/api/v1/experiments/{exp_id}/trials?states=STATE_CANCELED", headers=admin
    ).json()
    assert [t["id"] for t in canceled["trials"]] == [third]
    active = client.get(
        f"/api/v1/experiments/{exp_id}/trials?states=STATE_ACTIVE&sortBy=SORT_BY_START_TIME",
        headers=admin,
    ).json()
    assert [t["id"] for t in active["trials"]] == [first, second]
    for sort in ("SORT_BY_DURATION", "SORT_BY_BEST_VALIDATION_METRIC", "SORT_BY_CHECKPOINT_SIZE"):
        resp = client.get(f"/api/v1/experiments/{exp_id}/trials?sortBy={sort}", headers=admin)
        assert resp.status_code == 200, sort
        assert len(resp.json()["trials"]) == 3
    assert client.get("/api/v1/experiments/99/trials", headers=admin).status_code == 404


# --- edit (PATCH) -----------------------------------------------------------------------------


def test_patch_name_description_labels(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin, labels="[a]")
    resp = client.patch(
        f"/api/v1/experiments/{exp_id}",
        json={"id": exp_id, "name": " renamed ", "description": "d", "labels": ["a", "b", "b"]},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    exp = resp.json()["experiment"]
    assert (exp["name"], exp["description"], exp["labels"]) == ("renamed", "d", ["a", "b"])
    body = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()
    assert body["experiment"]["labels"] == ["a", "b"]
    config = body["config"]
    assert (config["name"], config["description"], config["labels"]) == ("renamed", "d", ["a", "b"])
    listed = client.get("/api/v1/experiments", params={"labels": "b"}, headers=admin).json()
    assert [e["id"] for e in listed["experiments"]] == [exp_id]
    # Absent and null fields stay as they are.
    same = client.patch(f"/api/v1/experiments/{exp_id}", json={"name": None}, headers=admin)
    assert same.json()["experiment"]["name"] == "renamed"


def test_patch_resources_reach_the_scheduler(client: TestClient, admin: dict[str, str]) -> None:
    from stalwart.master.rm.agent.placement import read_snapshot

    exp_id = new_experiment(client, admin)
    add_trial(client, exp_id, allocation="PENDING")
    resp = client.patch(
        f"/api/v1/experiments/{exp_id}",
        json={"id": exp_id, "resources": {"priority": 7, "weight": 2.5, "maxSlots": 3}},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    resources = resp.json()["experiment"]["config"]["resources"]
    assert (resources["priority"], resources["weight"], resources["max_slots"]) == (7, 2.5, 3)
    state = master(client)
    with state.sessions() as session:
        snap = read_snapshot(session, state.settings)
    (request,) = [r for r in snap.requests if r.group_id == str(exp_id)]
    assert (request.priority, request.weight) == (7, 2.5)
    assert [g.max_slots for g in snap.groups if g.group_id == str(exp_id)] == [3]
    cleared = client.patch(
        f"/api/v1/experiments/{exp_id}", json={"resources": {"maxSlots": None}}, headers=admin
    )
    resources = cleared.json()["experiment"]["config"]["resources"]
    assert "max_slots" not in resources
    assert resources["priority"] == 7


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "  "}, "must not be an empty"),
        ({"labels": ["ok", " "]}, "labels must not be empty"),
        ({"resources": {"priority": 0}}, "between 1 and 99"),
        ({"resources": {"weight": 0}}, "greater than 0"),
        ({"resources": {"maxSlots": 0}}, "at least 1"),
        ({"notes": "x" * 1_000_001}, "notes must be at most 1,000,000 characters"),
        ({"checkpointStorage": {"saveTrialBest": -1}}, "save_trial_best must be between 0 and"),
        ({"id": 999}, "not the experiment"),
    ],
)
def test_patch_refusals(
    client: TestClient, admin: dict[str, str], body: dict[str, Any], message: str
) -> None:
    exp_id = new_experiment(client, admin, name="keep")
    resp = client.patch(f"/api/v1/experiments/{exp_id}", json=body, headers=admin)
    assert resp.status_code == 400, resp.text
    assert message in resp.json()["message"]
    exp = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    assert exp["name"] == "keep"


def test_patch_notes_are_kept_and_leave_the_config_alone(
    client: TestClient, admin: dict[str, str]
) -> None:
    """The web UI's Notes tab and ``PATCH`` with ``notes`` (Determined's ``v1PatchExperiment``):
    free text stored as sent, served as ``notes``, not written into the config."""
    exp_id = new_experiment(client, admin)
    text = "# Findings\nlr 0.1 diverges; try 0.01.\n"
    resp = client.patch(f"/api/v1/experiments/{exp_id}", json={"notes": text}, headers=admin)
    assert resp.status_code == 200, resp.text
    assert resp.json()["experiment"]["notes"] == text
    exp = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    assert exp["notes"] == text
    assert "notes" not in exp["config"]
    client.patch(f"/api/v1/experiments/{exp_id}", json={"name": "renamed"}, headers=admin)
    kept = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    assert kept["notes"] == text  # absent: left as it is
    client.patch(f"/api/v1/experiments/{exp_id}", json={"notes": ""}, headers=admin)
    cleared = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    assert cleared["notes"] == ""


def test_patch_archived_unknown_and_credentials(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    complete(client, exp_id)
    assert client.post(f"/api/v1/experiments/{exp_id}/archive", headers=admin).status_code == 200
    resp = client.patch(f"/api/v1/experiments/{exp_id}", json={"name": "x"}, headers=admin)
    assert resp.status_code == 400
    assert "archived" in resp.json()["message"]
    assert client.patch("/api/v1/experiments/9999", json={}, headers=admin).status_code == 404
    assert client.patch(f"/api/v1/experiments/{exp_id}", json={}).status_code == 401
