"""The webhook deliverer against a real receiver on loopback: signatures, retries, refusals,
timeouts, and events written while no deliverer ran."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.master.app import create_app
from stalwart.master.cluster.webhooks import WebhookDeliverer
from stalwart.master.db.tables import WebhookDelivery
from stalwart.master.services.webhook_payloads import verify
from stalwart.master.state import MasterState
from tests.master.conftest import login, make_settings
from tests.master.test_experiments_api import complete, master, new_experiment
from tests.master.test_webhooks_api import webhook
from tests.webhook_receiver import HANG, Receiver, receiver

KEY = "test-signing-key"


@pytest.fixture
def hooks() -> Iterator[Receiver]:
    with receiver() as found:
        yield found


@pytest.fixture
def attempt_timeout() -> float:
    """``webhooks.attempt_timeout``: ample for a receiver that answers at once on a busy
    machine; the hanging-receiver test sets 1 s."""
    return 10.0


@pytest.fixture
def client(tmp_path: Path, attempt_timeout: float) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path / "home",
        webhooks={
            "signing_key": KEY,
            "attempt_timeout": attempt_timeout,
            "backoff": 0.1,
            "max_attempts": 3,
            "concurrency": 2,
        },
    )
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


@pytest.fixture
def admin(client: TestClient) -> dict[str, str]:
    return login(client, "admin")


@pytest.fixture
def deliverer(client: TestClient) -> Iterator[WebhookDeliverer]:
    running = WebhookDeliverer(master(client))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def rows(state: MasterState, webhook_id: int) -> list[WebhookDelivery]:
    with state.sessions() as session:
        return list(
            session.scalars(
                select(WebhookDelivery)
                .where(WebhookDelivery.webhook_id == webhook_id)
                .order_by(WebhookDelivery.id)
            )
        )


def settled(state: MasterState, webhook_id: int, timeout: float = 30.0) -> WebhookDelivery:
    """The webhook's one delivery once it is DELIVERED or FAILED."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = rows(state, webhook_id)
        if found and found[0].state != "PENDING":
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"webhook {webhook_id}: {rows(state, webhook_id)} still pending")


def test_a_completed_experiment_is_posted_signed(
    client: TestClient, admin: dict[str, str], hooks: Receiver, deliverer: WebhookDeliverer
) -> None:
    made = webhook(client, admin, url=hooks.url("done"))
    exp_id = new_experiment(client, admin)
    complete(client, exp_id)
    (post,) = hooks.wait("done")
    assert verify(KEY, post.headers, post.body)
    assert not verify("another key", post.headers, post.body)
    assert post.headers["Content-Type"].startswith("application/json")
    body = json.loads(post.body)
    assert body["event_data"]["experiment"]["id"] == exp_id
    assert body["condition"] == {"state": "COMPLETED"}
    row = settled(master(client), made["id"])
    assert (row.state, row.attempts, row.last_error) == ("DELIVERED", 1, None)


def test_a_failing_receiver_gets_retries_then_succeeds(
    client: TestClient, admin: dict[str, str], hooks: Receiver, deliverer: WebhookDeliverer
) -> None:
    hooks.plan("flaky", 500, 503)
    made = webhook(client, admin, url=hooks.url("flaky"))
    complete(client, new_experiment(client, admin))
    posts = hooks.wait("flaky", 3)
    assert len({p.body for p in posts}) == 1  # the same event each time
    assert posts[1].at - posts[0].at >= 0.1  # the backoff
    row = settled(master(client), made["id"])
    assert (row.state, row.attempts) == ("DELIVERED", 3)


def test_a_refusal_is_not_retried_and_attempts_are_bounded(
    client: TestClient, admin: dict[str, str], hooks: Receiver, deliverer: WebhookDeliverer
) -> None:
    hooks.plan("gone", 404)
    hooks.plan("down", 500, 500, 500, 500)
    refused = webhook(client, admin, url=hooks.url("gone"))
    down = webhook(client, admin, url=hooks.url("down"))
    complete(client, new_experiment(client, admin))
    row = settled(master(client), refused["id"])
    assert (row.state, row.attempts, row.last_error) == ("FAILED", 1, "the receiver answered 404")
    row = settled(master(client), down["id"])
    assert (row.state, row.attempts) == ("FAILED", 3)  # max_attempts
    assert len(hooks.to("down")) == 3


@pytest.mark.parametrize("attempt_timeout", [1.0])
def test_a_hanging_receiver_times_out_without_holding_up_others(
    client: TestClient,
    admin: dict[str, str],
    hooks: Receiver,
    deliverer: WebhookDeliverer,
    attempt_timeout: float,
) -> None:
    hooks.plan("hang", HANG, HANG, HANG)
    hanging = webhook(client, admin, url=hooks.url("hang"))
    fine = webhook(client, admin, url=hooks.url("fine"))
    complete(client, new_experiment(client, admin))
    hooks.wait("fine")  # delivered while the other attempt hangs
    assert settled(master(client), fine["id"]).state == "DELIVERED"
    row = settled(master(client), hanging["id"])
    assert (row.state, row.attempts) == ("FAILED", 3)
    assert row.last_error == "timed out after 1 s"


def test_events_written_while_no_deliverer_ran_are_delivered_later(
    client: TestClient, admin: dict[str, str], hooks: Receiver
) -> None:
    made = webhook(client, admin, url=hooks.url("later"))
    complete(client, new_experiment(client, admin))  # the outbox holds it
    assert rows(master(client), made["id"])[0].state == "PENDING"
    later = WebhookDeliverer(master(client))  # as after a master restart
    later.start()
    try:
        hooks.wait("later")
        assert settled(master(client), made["id"]).state == "DELIVERED"
    finally:
        later.stop()


def test_the_test_endpoint_posts_a_signed_test_event(
    client: TestClient, admin: dict[str, str], hooks: Receiver
) -> None:
    made = webhook(client, admin, url=hooks.url("test"))
    resp = client.post(f"/api/v1/webhooks/{made['id']}/test", headers=admin)
    assert resp.status_code == 200
    assert resp.json() == {"completed": True}
    (post,) = hooks.to("test")
    assert verify(KEY, post.headers, post.body)
    assert json.loads(post.body)["event_data"] == {"data": "test"}
    hooks.plan("test", 500)
    resp = client.post(f"/api/v1/webhooks/{made['id']}/test", headers=admin)
    assert resp.status_code == 400
    assert "answered 500" in resp.json()["error"]["error"]


def test_the_outbox_and_the_deliverer_on_postgresql(
    tmp_path: Path, pg_url: str, hooks: Receiver
) -> None:
    """The same path on PostgreSQL: a state change and a log line (ON CONFLICT DO NOTHING for
    the second match of the task) become rows, and the guarded claim delivers each once."""
    from stalwart.master.db.tables import Trial
    from stalwart.master.services.logs import NewLog, add_logs
    from tests.master.test_experiments_api import add_trial

    settings = make_settings(
        tmp_path / "home", db=pg_url, webhooks={"signing_key": KEY, "backoff": 0.1}
    )
    with TestClient(create_app(settings, run_cluster=False)) as pg:
        headers = login(pg, "admin")
        hooks.plan("pg-state", 500)
        state_hook = webhook(pg, headers, url=hooks.url("pg-state"))
        log_hook = webhook(
            pg,
            headers,
            url=hooks.url("pg-log"),
            triggers=[{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "boom"}}],
        )
        exp_id = new_experiment(pg, headers)
        trial_id, *_ = add_trial(pg, exp_id)
        state = master(pg)
        with state.sessions() as session:
            trial = session.get(Trial, trial_id)
            assert trial is not None
            for _ in range(2):
                add_logs(session, [NewLog(task_id=trial.task_id, log="boom", agent_id="n")])
                session.commit()
        complete(pg, exp_id)
        running = WebhookDeliverer(state)
        running.start()
        try:
            hooks.wait("pg-state", 2)
            (post,) = hooks.wait("pg-log")
            assert verify(KEY, post.headers, post.body)
            assert settled(state, state_hook["id"]).attempts == 2
            assert settled(state, log_hook["id"]).state == "DELIVERED"
        finally:
            running.stop()
        assert len(rows(state, log_hook["id"])) == 1
