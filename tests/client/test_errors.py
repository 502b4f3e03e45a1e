"""The master's error bodies become the same StalwartError classes (pure)."""

from __future__ import annotations

import json

import pytest

from stalwart import errors
from stalwart.client.errors import (
    MasterError,
    error_from_body,
    error_from_response,
    error_from_stream,
)
from stalwart.master.api.errors import status_of


@pytest.mark.parametrize(
    "cls",
    [
        errors.InvalidArgumentError,
        errors.FailedPreconditionError,
        errors.UnauthenticatedError,
        errors.ForbiddenError,
        errors.NotFoundError,
        errors.AlreadyExistsError,
        errors.PayloadTooLargeError,
    ],
)
def test_round_trip_through_the_masters_error_shape(cls: type[errors.StalwartError]) -> None:
    """What the master's handler writes for ``cls`` comes back as ``cls``."""
    http, grpc, reason = status_of(cls("boom"))
    body = {"message": "boom", "error": {"code": grpc, "reason": reason, "error": "boom"}}
    back = error_from_response(http, json.dumps(body), method="GET", path="/x")
    assert type(back) is cls
    assert back.message == "boom"


def test_message_order_and_fallbacks() -> None:
    back = error_from_body(404, {"error": {"error": "inner"}}, fallback="f")
    assert (type(back), back.message) == (errors.NotFoundError, "inner")
    back = error_from_body(400, None, fallback="f")
    assert (type(back), back.message) == (errors.InvalidArgumentError, "f")
    back = error_from_response(502, "<html>bad gateway</html>", method="GET", path="/x")
    assert isinstance(back, MasterError)
    assert back.status == 502
    assert "bad gateway" in back.message


def test_hints_say_what_to_do_next() -> None:
    missing = error_from_body(404, {"message": "experiment 9 not found"}, fallback="")
    assert "experiment list" in str(missing)
    assert "user login bob" in str(error_from_body(401, {}, fallback="no", user="bob"))


def test_stream_errors() -> None:
    line = {"grpcCode": 5, "httpCode": 404, "message": "trial 3 not found", "details": []}
    back = error_from_stream(line)
    assert (type(back), back.message) == (errors.NotFoundError, "trial 3 not found")
    assert isinstance(error_from_stream({"message": "x"}), MasterError)
