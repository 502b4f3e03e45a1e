"""Session: the allocation-token header, retries, error classes, deadlines, close.

The retry rules are tested over httpx's shipped ``MockTransport`` (a scripted master); cutting
a real long-poll is tested in test_preempt.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import httpx
import pytest

from stalwart import errors
from stalwart.core._client import (
    MasterAPIError,
    MasterUnreachableError,
    RetryPolicy,
    Session,
    SessionClosedError,
)

FAST = RetryPolicy(initial_backoff_s=0.001, max_backoff_s=0.01, deadline_s=5.0)


def scripted(
    *answers: httpx.Response | Exception,
) -> tuple[Callable[..., Session], list[httpx.Request]]:
    """A session factory over a transport that plays ``answers`` in order."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def make(retry: RetryPolicy = FAST) -> Session:
        return Session(
            "http://master:8080/", "tok", retry=retry, transport=httpx.MockTransport(handler)
        )

    return make, seen


def error(status: int, message: str, reason: str = "InvalidArgument") -> httpx.Response:
    body = {"message": message, "error": {"code": 3, "reason": reason, "error": message}}
    return httpx.Response(status, json=body)


def test_token_header_and_json_body() -> None:
    make, seen = scripted(httpx.Response(200, json={"storageId": 3}))
    with_session = make()
    assert with_session.post("/api/v1/runs/start", {"runId": 1, "x": float("nan")}) == {
        "storageId": 3
    }
    request = seen[0]
    assert request.headers["Grpc-Metadata-x-allocation-token"] == "Bearer tok"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.content) == {"runId": 1, "x": "NaN"}
    assert str(request.url) == "http://master:8080/api/v1/runs/start"
    with_session.close()


def test_retries_connection_errors_and_gateway_statuses() -> None:
    make, seen = scripted(
        httpx.ConnectError("refused"),
        httpx.Response(503),
        httpx.ReadError("reset"),
        httpx.Response(502, text="bad gateway"),
        httpx.Response(200),
    )
    session = make()
    assert session.get("/api/v1/me") == {}
    assert len(seen) == 5
    session.close()


@pytest.mark.parametrize(
    ("response", "cls"),
    [
        (error(400, "invalid run id"), errors.InvalidArgumentError),
        (error(400, "not now", "FailedPrecondition"), errors.FailedPreconditionError),
        (error(401, "who?"), errors.UnauthenticatedError),
        (error(403, "not yours"), errors.ForbiddenError),
        (error(404, "no such trial"), errors.NotFoundError),
        (error(409, "exists"), errors.AlreadyExistsError),
        (error(413, "too big"), errors.PayloadTooLargeError),
        (error(500, "boom"), MasterAPIError),
    ],
)
def test_errors_carry_the_masters_message(
    response: httpx.Response, cls: type[errors.StalwartError]
) -> None:
    make, seen = scripted(response)
    session = make()
    with pytest.raises(cls) as info:
        session.post("/api/v1/trials/1/progress", {"progress": 0.5})
    assert response.json()["message"] in str(info.value)
    assert f"HTTP {response.status_code}" in str(info.value)
    assert len(seen) == 1  # never retried
    session.close()


def test_message_from_nested_error_and_plain_bodies() -> None:
    make, _ = scripted(
        httpx.Response(404, json={"error": {"error": "gone"}}), httpx.Response(400, text="plain")
    )
    session = make()
    with pytest.raises(errors.NotFoundError, match="gone"):
        session.get("/x")
    with pytest.raises(errors.InvalidArgumentError, match="plain"):
        session.get("/y")
    session.close()


def test_gives_up_at_the_deadline() -> None:
    make, seen = scripted(*[httpx.ConnectError("refused")] * 100)
    session = make(RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.02, deadline_s=0.1))
    with pytest.raises(MasterUnreachableError, match="did not answer GET /api/v1/me"):
        session.get("/api/v1/me")
    assert 2 <= len(seen) < 100
    session.close()


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_backoff_s=1.0, max_backoff_s=4.0)
    assert [round(policy.backoff(n)) for n in range(5)] == [1, 2, 4, 4, 4]
    assert all(1.0 <= policy.backoff(0) <= 1.1 for _ in range(20))


def test_close_wakes_a_retry_wait() -> None:
    entered = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        entered.set()
        raise httpx.ConnectError("refused")

    slow = RetryPolicy(initial_backoff_s=60.0, max_backoff_s=60.0, deadline_s=600.0)
    session = Session("http://m:8080", "tok", retry=slow, transport=httpx.MockTransport(handler))
    failure: list[BaseException] = []

    def call() -> None:
        try:
            session.get("/api/v1/me")
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert entered.wait(5)
    session.close()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(failure[0], SessionClosedError)
    with pytest.raises(SessionClosedError):
        session.get("/api/v1/me")


def test_a_master_error_survives_pickling_with_its_status() -> None:
    """Errors cross process boundaries (multiprocessing pools, torch workers) intact."""
    import pickle

    error = MasterAPIError("the master said no", status=418)
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, MasterAPIError)
    assert (str(copy), copy.status) == ("the master said no", 418)
