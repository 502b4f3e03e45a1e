"""The one place that turns errors into HTTP responses.

Body (Determined's grpc-gateway shape, plus a top-level ``message`` the client reads first):
``{"message": m, "error": {"code": <grpc code>, "reason": "<CodeName>", "error": m}}``.

A database error that a retry can cure (the connection was lost or terminated, the server is
shutting down, a serialization failure or deadlock, SQLite busy) is 503 ``Unavailable``: the
Core API client and the agent retry 503, and the pool (``pool_pre_ping``) has already dropped
the dead connection. A value the database cannot hold (a number past its integer range: SQLite's
``OverflowError``, PostgreSQL's data exceptions, SQLSTATE class 22) came from the request: 400
``InvalidArgument``. Other database errors are 500 in the same shape.

Input no handler foresaw is still answered 400, not 500: text that cannot be stored (a lone
UTF-16 surrogate such as ``"\\ud800"``: ``UnicodeEncodeError``) and data nested too deeply
to process (``RecursionError``). A client that leaves before its body arrives
(``ClientDisconnect``) is no error: 499, logged at debug level.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from stalwart import errors

log = logging.getLogger(__name__)

CLIENT_CLOSED_REQUEST = 499
"""The status recorded for a request whose client left before its body arrived (nginx's)."""

_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57"})
"""PostgreSQL error classes a retry can cure: connection exception, transaction rollback
(serialization failure, deadlock), insufficient resources, operator intervention (terminated
backend, server shutdown)."""

_DATA_EXCEPTION_SQLSTATE_CLASS = "22"
"""PostgreSQL's data exceptions (numeric value out of range, invalid text representation...):
a value from the request that the column cannot hold."""

_NOT_TEXT = (
    "invalid request: a string holds a lone UTF-16 surrogate (such as \\ud800), which is not "
    "text; send valid UTF-8"
)
_TOO_DEEP = "invalid request: data nested too deeply to process; flatten it"

_OUT_OF_RANGE = (
    "invalid request: a value the master cannot store (a number out of range, or malformed);"
    " check the ids and numbers sent"
)

__all__ = ["error_response", "install_error_handlers", "status_of"]

# StalwartError.code -> (HTTP status, gRPC code, gRPC code name)
_STATUS: dict[str, tuple[int, int, str]] = {
    errors.InvalidArgumentError.code: (400, 3, "InvalidArgument"),
    errors.ConfigError.code: (400, 3, "InvalidArgument"),
    errors.FailedPreconditionError.code: (400, 9, "FailedPrecondition"),
    errors.InvalidTransitionError.code: (400, 9, "FailedPrecondition"),
    errors.UnauthenticatedError.code: (401, 16, "Unauthenticated"),
    errors.ForbiddenError.code: (403, 7, "PermissionDenied"),
    errors.NotFoundError.code: (404, 5, "NotFound"),
    errors.AlreadyExistsError.code: (409, 6, "AlreadyExists"),
    errors.PayloadTooLargeError.code: (413, 8, "ResourceExhausted"),
    errors.TooManyRequestsError.code: (429, 8, "ResourceExhausted"),
    errors.UnavailableError.code: (503, 14, "Unavailable"),
}
_INTERNAL = (500, 13, "Internal")
_BY_HTTP = {
    400: (3, "InvalidArgument"),
    401: (16, "Unauthenticated"),
    403: (7, "PermissionDenied"),
    404: (5, "NotFound"),
    405: (12, "Unimplemented"),
    409: (6, "AlreadyExists"),
    413: (8, "ResourceExhausted"),
}


def status_of(exc: errors.StalwartError) -> tuple[int, int, str]:
    """HTTP status, gRPC code and name for an error (500 for codes not in the table)."""
    for cls in type(exc).__mro__:
        code = getattr(cls, "code", None)
        if isinstance(code, str) and code in _STATUS:
            return _STATUS[code]
    return _INTERNAL


def error_response(http: int, grpc: int, reason: str, message: str) -> JSONResponse:
    """A JSON error response in the wire shape."""
    body = {"message": message, "error": {"code": grpc, "reason": reason, "error": message}}
    return JSONResponse(body, status_code=http)


def database_error_is_transient(exc: DBAPIError) -> bool:
    """Whether retrying the request may succeed (see the module docstring)."""
    if exc.connection_invalidated:
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES:
        return True
    return "database is locked" in str(exc.orig)


def install_error_handlers(app: FastAPI) -> None:
    """Map StalwartError, request validation errors and HTTP errors to the wire shape."""

    @app.exception_handler(errors.StalwartError)
    async def _stalwart(_request: Request, exc: errors.StalwartError) -> JSONResponse:
        http, grpc, reason = status_of(exc)
        response = error_response(http, grpc, reason, str(exc))
        if isinstance(exc, errors.TooManyRequestsError):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, _exc: ClientDisconnect) -> Response:
        # The client closed the connection before its body arrived (an agent cancels a held
        # sync as soon as one of its tasks exits): nobody is left to answer, nothing failed.
        log.debug(
            "%s %s: the client left before its body arrived", request.method, request.url.path
        )
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    @app.exception_handler(OverflowError)
    async def _overflow(_request: Request, _exc: OverflowError) -> JSONResponse:
        return error_response(400, 3, "InvalidArgument", _OUT_OF_RANGE)

    @app.exception_handler(UnicodeEncodeError)
    async def _not_text(_request: Request, _exc: UnicodeEncodeError) -> JSONResponse:
        return error_response(400, 3, "InvalidArgument", _NOT_TEXT)

    @app.exception_handler(RecursionError)
    async def _too_deep(_request: Request, _exc: RecursionError) -> JSONResponse:
        return error_response(400, 3, "InvalidArgument", _TOO_DEEP)

    @app.exception_handler(PoolTimeoutError)
    async def _pool_timeout(request: Request, exc: PoolTimeoutError) -> JSONResponse:
        # Every pooled connection is busy (a load peak): the request did nothing; a retry can
        # succeed, and the Core API client and the agent retry 503.
        log.warning(
            "%s %s: no database connection free, answered 503", request.method, request.url.path
        )
        return error_response(503, 14, "Unavailable", "the master is busy; retry")

    @app.exception_handler(DBAPIError)
    async def _database(request: Request, exc: DBAPIError) -> JSONResponse:
        sqlstate = getattr(exc.orig, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate[:2] == _DATA_EXCEPTION_SQLSTATE_CLASS:
            return error_response(400, 3, "InvalidArgument", _OUT_OF_RANGE)
        if database_error_is_transient(exc):
            log.warning(
                "%s %s: database unavailable, answered 503: %s",
                request.method,
                request.url.path,
                exc.orig,
            )
            return error_response(503, 14, "Unavailable", "the database is unavailable; retry")
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(*_INTERNAL, "internal error: database")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
        return error_response(400, 3, "InvalidArgument", "invalid request: " + "; ".join(parts))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        grpc, reason = _BY_HTTP.get(exc.status_code, (2, "Unknown"))
        return error_response(exc.status_code, grpc, reason, str(exc.detail))
