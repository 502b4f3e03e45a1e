"""Errors from the master, re-raised on the client side as the same StalwartError classes.

The master answers every error with one JSON shape (``stalwart.master.api.errors``):
``{"message": m, "error": {"code": <gRPC code>, "reason": "<gRPC name>", "error": m}}``, and a
stream that fails after it started sends ``{"error": {"grpcCode", "httpCode", "message"}}`` as
its last line. :func:`error_from_response` and :func:`error_from_stream` turn both into the
matching :class:`~stalwart.errors.StalwartError` subclass, carrying the master's message and a
hint that says what to do next.
"""

from __future__ import annotations

import json
from typing import Any

from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    StalwartError,
    TooManyRequestsError,
    UnauthenticatedError,
)

__all__ = [
    "ExperimentNotCompletedError",
    "MasterError",
    "MasterUnreachableError",
    "TaskEndedError",
    "TrialFailedError",
    "WaitTimeoutError",
    "error_from_body",
    "error_from_response",
    "error_from_stream",
]


class MasterUnreachableError(StalwartError):
    """The master did not answer (nothing listens there, or the network is down)."""

    code = "master_unreachable"


class MasterError(StalwartError):
    """The master failed with a status the error tree has no class for (5xx and the like)."""

    code = "master_error"

    def __init__(self, message: str, *, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class ExperimentNotCompletedError(StalwartError):
    """An experiment that was waited for ended in a state other than COMPLETED."""

    code = "experiment_not_completed"

    def __init__(self, experiment_id: int, state: str, *, hint: str | None = None) -> None:
        super().__init__(f"experiment {experiment_id} ended {state}", hint=hint)
        self.experiment_id = experiment_id
        self.state = state


_BY_REASON: dict[str, type[StalwartError]] = {
    "InvalidArgument": InvalidArgumentError,
    "FailedPrecondition": FailedPreconditionError,
    "Unauthenticated": UnauthenticatedError,
    "PermissionDenied": ForbiddenError,
    "NotFound": NotFoundError,
    "AlreadyExists": AlreadyExistsError,
    "ResourceExhausted": PayloadTooLargeError,
}
_BY_GRPC = {3: "InvalidArgument", 9: "FailedPrecondition", 16: "Unauthenticated"}
_BY_GRPC |= {7: "PermissionDenied", 5: "NotFound", 6: "AlreadyExists", 8: "ResourceExhausted"}
_BY_STATUS = {400: "InvalidArgument", 401: "Unauthenticated", 403: "PermissionDenied"}
_BY_STATUS |= {404: "NotFound", 409: "AlreadyExists", 413: "ResourceExhausted"}

_NOT_FOUND_HINTS = {
    "experiment": "list experiments with `stalwart experiment list --all`",
    "trial": "list an experiment's trials with `stalwart experiment list-trials EXPERIMENT_ID`",
    "checkpoint": "list checkpoints with `stalwart experiment list-checkpoints EXPERIMENT_ID`",
    "user": "list users with `stalwart user list`",
    "agent": "list agents with `stalwart agent list`",
}


def _hint(cls: type[StalwartError], message: str, user: str | None) -> str | None:
    if cls is UnauthenticatedError:
        who = user or "USERNAME"
        return f"log in with `stalwart user login {who}`"
    if cls is ForbiddenError and "not active" not in message:
        return "this needs other rights: log in as an admin with `stalwart user login admin`"
    if cls is NotFoundError:
        return _NOT_FOUND_HINTS.get(message.split(" ", 1)[0].lower())
    if cls is PayloadTooLargeError:
        return "leave large files out of the context with a .stalwartignore (gitignore syntax)"
    return None


def error_from_body(
    status: int, body: Any, *, fallback: str, user: str | None = None
) -> StalwartError:
    """The error for an HTTP ``status`` and a decoded JSON ``body`` (anything else is tolerated).

    ``fallback`` is the message when the body carries none. ``user`` names who to log in as in
    the hint of a 401.
    """
    message = ""
    reason = None
    if isinstance(body, dict):
        inner = body.get("error")
        inner = inner if isinstance(inner, dict) else {}
        message = str(body.get("message") or inner.get("message") or inner.get("error") or "")
        reason = inner.get("reason")
        if not isinstance(reason, str):
            code = inner.get("code", inner.get("grpcCode"))
            reason = _BY_GRPC.get(code) if isinstance(code, int) else None
    reason = reason or _BY_STATUS.get(status)
    message = message or fallback
    if status == 429:  # e.g. too many failed logins: the message says how long to wait
        return TooManyRequestsError(message, retry_after=1)
    cls = _BY_REASON.get(reason or "")
    if cls is None:
        return MasterError(
            f"the master answered {status}: {message}",
            status=status,
            hint="see the master's log; `stalwart --debug ...` shows the traceback here",
        )
    return cls(message, hint=_hint(cls, message, user))


def error_from_response(
    status: int, text: str, *, method: str, path: str, user: str | None = None
) -> StalwartError:
    """The error for an HTTP error response whose body is ``text``."""
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        body = None
    fallback = text.strip()[:200] or f"{method} {path} failed with HTTP {status}"
    return error_from_body(status, body, fallback=fallback, user=user)


def error_from_stream(error: Any) -> StalwartError:
    """The error for the ``error`` object of a failed NDJSON stream line."""
    status = 500
    if isinstance(error, dict):
        raw = error.get("httpCode", error.get("httpStatus"))
        try:
            status = int(raw) if raw is not None else 500
        except (TypeError, ValueError):
            status = 500
    return error_from_body(status, {"error": error}, fallback="the stream failed")


class WaitTimeoutError(StalwartError):
    """Something waited for did not happen in time."""

    code = "wait_timeout"


class TrialFailedError(StalwartError):
    """A trial that was followed ended in ERROR."""

    code = "trial_failed"


class TaskEndedError(StalwartError):
    """An interactive task that was waited for ended first (or a followed command failed)."""

    code = "task_ended"
