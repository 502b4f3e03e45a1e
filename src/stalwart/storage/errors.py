"""What storage operations raise, and which failures are worth retrying.

Contract:

- Every backend method raises only :class:`StorageError` subclasses (plus ``ValueError`` for a
  bad storage id and the caller's own exceptions, e.g. from a selector or progress callback).
- :class:`StorageUnavailableError` (``retryable`` True) means "try again later": the store did
  not answer, timed out, or said it is busy (HTTP 5xx, throttling). Backends have already
  retried it for a while before raising it.
- :class:`CheckpointNotFoundError` means the checkpoint is not there; retrying will not help.
- :class:`MissingExtraError` says which extra to install for a cloud storage type.
- :func:`is_retryable` classifies any exception from an fsspec file system (pure: it reads the
  exception, its ``errno``, its class names and its cause chain).
"""

from __future__ import annotations

import errno
from typing import Any

from stalwart import errors

__all__ = [
    "CheckpointNotFoundError",
    "MissingExtraError",
    "StorageError",
    "StorageUnavailableError",
    "is_retryable",
]


class StorageError(errors.StalwartError):
    """A checkpoint storage operation failed; ``retryable`` says whether trying again may help."""

    code = "storage_error"
    retryable = False


class StorageUnavailableError(StorageError):
    """The store did not answer or is busy (retried already; a later try may succeed)."""

    code = "storage_unavailable"
    retryable = True


class CheckpointNotFoundError(StorageError, errors.NotFoundError):
    """No checkpoint with that storage id in this storage."""

    code = "checkpoint_not_found"


class MissingExtraError(StorageError, ImportError):
    """A cloud storage type whose optional package is not installed."""

    code = "storage_extra_missing"

    def __init__(self, kind: str, package: str, extra: str) -> None:
        super().__init__(
            f"checkpoint_storage type {kind!r} needs the {package} package, which is not installed",
            hint=f"pip install 'stalwart[{extra}]'",
        )
        self.kind = kind
        self.package = package
        self.extra = extra


_RETRY_ERRNOS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EAGAIN,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EPIPE,
    }
)
# Transient errors of the cloud SDKs under s3fs (botocore, aiohttp), gcsfs (aiohttp,
# google-auth) and adlfs (azure-core), matched by class name so nothing here imports them.
_RETRY_CLASS_NAMES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "TransportError",
        "ServiceRequestError",
        "ServiceResponseError",
    }
)
_RETRY_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "ServerBusy",
        "OperationTimedOut",
    }
)


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries (botocore ``response``, gcsfs/azure ``code``/
    ``status_code``), if any."""
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return status if isinstance(status, int) else None
    for attr in ("status_code", "status", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    return None


def _error_code_of(exc: BaseException) -> str | None:
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = (response.get("Error") or {}).get("Code")
        return code if isinstance(code, str) else None
    code = getattr(exc, "error_code", None)
    return code if isinstance(code, str) else None


def _verdict(exc: BaseException) -> bool | None:
    """True/False when ``exc`` itself decides; None when only its cause can tell."""
    if isinstance(exc, StorageError):
        return exc.retryable
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError | ValueError):
        return False
    if isinstance(exc, OSError) and exc.errno in _RETRY_ERRNOS:
        return True
    if any(cls.__name__ in _RETRY_CLASS_NAMES for cls in type(exc).__mro__):
        return True
    if _error_code_of(exc) in _RETRY_CODES:
        return True
    status = _status_of(exc)
    if status is not None and 100 <= status < 600:
        return status >= 500 or status in (408, 429)
    return None


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient failure: decided by the first exception in its cause chain
    (``__cause__``, else ``__context__``) that says either way; False when none does."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        verdict = _verdict(current)
        if verdict is not None:
            return verdict
        current = current.__cause__ or current.__context__
    return False
