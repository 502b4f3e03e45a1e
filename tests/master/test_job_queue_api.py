"""The job queue's REST API (``/api/v1/job-queues-v2``, ``/api/v1/job-queues``) on an
in-process master without a cluster loop: queued tasks, their order, what each caller sees and
which changes each scheduler accepts (the start order itself: ``tests/compat/test_det_jobs.py``
and ``tests/master/scheduler/test_queue_order.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.master.app import create_app
from stalwart.master.db.tables import User, Workspace, WorkspaceRole
from tests.master.conftest import login, make_settings

Headers = dict[str, str]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path / "home",
        resource_pools=[
            {"pool_name": "default"},
            {"pool_name": "shared", "scheduler": {"type": "fair_share"}},
        ],
    )
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


def _launch(client: TestClient, headers: Headers, **config: Any) -> str:
    body = {"config": {"entrypoint": "sleep 60", **config}}
    resp = client.post("/api/v1/commands", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["command"]["id"])


def _jobs(client: TestClient, headers: Headers, **params: Any) -> list[dict[str, Any]]:
    resp = client.get("/api/v1/job-queues-v2", params=params, headers=headers)
    assert resp.status_code == 200, resp.text
    jobs: list[dict[str, Any]] = resp.json()["jobs"]
    return jobs


def _update(client: TestClient, headers: Headers, **update: Any) -> Any:
    return client.post("/api/v1/job-queues", json={"updates": [update]}, headers=headers)


def _user(client: TestClient, admin: Headers, name: str) -> Headers:
    made = client.post(
        "/api/v1/users",
        json={"user": {"username": name, "active": True}, "password": "", "isHashed": False},
        headers=admin,
    )
    assert made.status_code == 200, made.text
    return login(client, name)


def test_jobs_are_listed_in_queue_order_and_reordered(client: TestClient) -> None:
    admin = login(client, "admin")
    first, second, third = (_launch(client, admin) for _ in range(3))
    jobs = _jobs(client, admin)
    assert [j["full"]["jobId"] for j in jobs] == [first, second, third]
    assert [j["full"]["summary"] for j in jobs] == [
        {"state": "STATE_QUEUED", "jobsAhead": n} for n in range(3)
    ]
    one = jobs[0]["full"]
    assert one["type"] == "TYPE_COMMAND"
    assert one["requestedSlots"] == 1
    assert one["allocatedSlots"] == 0
    assert one["priority"] == 42
    assert one["username"] == "admin"
    assert one["resourcePool"] == "default"

    assert _update(client, admin, jobId=third, priority=10).status_code == 200
    assert [j["full"]["jobId"] for j in _jobs(client, admin)] == [third, first, second]
    assert _update(client, admin, jobId=second, aheadOf=first).status_code == 200
    listed = _jobs(client, admin)
    assert [j["full"]["jobId"] for j in listed] == [third, second, first]
    assert listed[1]["full"]["priority"] == 41  # one less than first's: its order is later
    assert _update(client, admin, jobId=third, behindOf=first).status_code == 200
    assert [j["full"]["jobId"] for j in _jobs(client, admin)] == [second, first, third]
    reverse = _jobs(client, admin, orderBy="ORDER_BY_DESC")
    assert [j["full"]["jobId"] for j in reverse] == [third, first, second]
    # det <kind> set priority takes the same path
    resp = client.post(
        f"/api/v1/commands/{third}/set_priority", json={"priority": 1}, headers=admin
    )
    assert resp.status_code == 200, resp.text
    assert _jobs(client, admin)[0]["full"]["jobId"] == third


def test_refusals_say_why(client: TestClient) -> None:
    admin = login(client, "admin")
    job = _launch(client, admin)
    shared = _launch(client, admin, resources={"resource_pool": "shared"})
    weight = _update(client, admin, jobId=job, weight=2)
    assert weight.status_code == 400
    assert "only to pools with the fair_share scheduler" in weight.text
    priority = _update(client, admin, jobId=shared, priority=5)
    assert priority.status_code == 400
    assert "uses the fair_share scheduler: set the job's weight instead" in priority.text
    move = _update(client, admin, jobId=shared, aheadOf=job)
    assert move.status_code == 400
    assert _update(client, admin, jobId=shared, weight=3).status_code == 200
    assert {j["full"]["jobId"]: j["full"]["weight"] for j in _jobs(client, admin)}[shared] == 3
    pool = _update(client, admin, jobId=job, resourcePool="shared")
    assert pool.status_code == 400
    assert "another resource pool" in pool.text
    assert _update(client, admin, jobId=job, priority=0).status_code == 400
    assert _update(client, admin, jobId="nope", priority=5).status_code == 404
    top = _update(client, admin, jobId=job, priority=1)
    assert top.status_code == 200
    other = _launch(client, admin)
    stuck = _update(client, admin, jobId=other, aheadOf=job)
    assert stuck.status_code == 400
    assert "outside 1-99" in stuck.text
    assert [j["full"]["jobId"] for j in _jobs(client, admin, resourcePool="shared")] == [shared]


def test_others_see_limited_jobs_and_cannot_change_them(client: TestClient) -> None:
    admin = login(client, "admin")
    alice, bob = _user(client, admin, "alice"), _user(client, admin, "bob")
    state = client.app.state.master  # type: ignore[attr-defined]
    with state.sessions() as session:
        private = Workspace(name="private", default_role="none")
        session.add(private)
        session.flush()
        alice_id = session.scalars(select(User.id).where(User.username == "alice")).one()
        session.add(WorkspaceRole(workspace_id=private.id, user_id=alice_id, role="member"))
        session.commit()
        private_id = private.id
    body = {"config": {"entrypoint": "sleep 60"}, "workspaceId": private_id}
    made = client.post("/api/v1/commands", json=body, headers=alice)
    assert made.status_code == 200, made.text
    hidden = made.json()["command"]["id"]
    visible = _launch(client, alice)
    seen = {(j.get("full") or j["limited"])["jobId"]: j for j in _jobs(client, bob)}
    assert "limited" in seen[hidden]
    assert "full" not in seen[hidden]
    assert "full" in seen[visible]
    assert seen[visible]["full"]["username"] == "alice"
    refused = _update(client, bob, jobId=visible, priority=1)
    assert refused.status_code == 403, refused.text
    assert _update(client, alice, jobId=visible, priority=1).status_code == 200


def test_a_page_of_the_queue_describes_only_its_jobs(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``offset``/``limit`` give a window of the scheduler's order with the whole queue's total,
    each job keeping its place (``jobsAhead``); only the page's jobs are read and checked (the
    web UI's job queue polls one page of a pool's queue)."""
    from stalwart.master.services import job_queue

    admin = login(client, "admin")
    made = [_launch(client, admin) for _ in range(7)]
    described: list[str] = []
    describe = job_queue._describe

    def counting(session: Any, user: Any, job: Any, group_id: str) -> None:
        described.append(group_id)
        describe(session, user, job, group_id)

    monkeypatch.setattr(job_queue, "_describe", counting)
    resp = client.get(
        "/api/v1/job-queues-v2",
        params={"resourcePool": "default", "offset": 2, "limit": 3},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [j["full"]["jobId"] for j in body["jobs"]] == made[2:5]
    assert [j["full"]["summary"]["jobsAhead"] for j in body["jobs"]] == [2, 3, 4]
    assert body["pagination"] == {
        "offset": 2,
        "limit": 3,
        "startIndex": 2,
        "endIndex": 5,
        "total": 7,
    }
    assert len(described) == 3
    described.clear()
    last = client.get(
        "/api/v1/job-queues-v2",
        params={"resourcePool": "default", "offset": 6, "limit": 3},
        headers=admin,
    ).json()
    assert [j["full"]["jobId"] for j in last["jobs"]] == made[6:]
    assert last["pagination"]["total"] == 7
    assert len(described) == 1
    # states and the reverse order are applied before the page is taken
    reverse = _jobs(client, admin, orderBy="ORDER_BY_DESC", offset=0, limit=2)
    assert [j["full"]["jobId"] for j in reverse] == made[:-3:-1]
    assert _jobs(client, admin, states="STATE_SCHEDULED", limit=2) == []
