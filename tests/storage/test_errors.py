"""Which failures are worth retrying (pure classification) and the error classes' promises."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from stalwart import errors
from stalwart.storage import (
    CheckpointNotFoundError,
    MissingExtraError,
    StorageError,
    StorageUnavailableError,
    is_retryable,
)


class ClientError(Exception):
    """Shaped like botocore's ClientError: a ``response`` dict."""

    def __init__(self, status: int, code: str = "") -> None:
        super().__init__(f"{status} {code}")
        self.response: dict[str, Any] = {
            "Error": {"Code": code},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


class EndpointConnectionError(Exception):
    """Named like botocore's transient connection error."""


class HttpError(Exception):
    """Shaped like gcsfs's HttpError: an int ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(str(code))
        self.code = code


def chained(outer: Exception, cause: BaseException) -> Exception:
    try:
        raise outer from cause
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (OSError(errno.ETIMEDOUT, "timed out"), True),
        (OSError(errno.EIO, "i/o"), False),
        (FileNotFoundError("gone"), False),
        (PermissionError("denied"), False),
        (ValueError("bad"), False),
        (ClientError(503, "SlowDown"), True),
        (ClientError(500), True),
        (ClientError(429), True),
        (ClientError(403, "AccessDenied"), False),
        (ClientError(0, "Throttling"), True),
        (EndpointConnectionError(), True),
        (HttpError(502), True),
        (HttpError(404), False),
        (RuntimeError("wrapper"), False),
        (chained(RuntimeError("wrapper"), ConnectionRefusedError()), True),
        (chained(OSError(errno.EIO, "s3fs"), ClientError(503)), True),
        (chained(FileNotFoundError("no bucket"), ConnectionResetError()), False),
        (StorageUnavailableError("busy"), True),
        (StorageError("broken"), False),
    ],
)
def test_is_retryable(exc: BaseException, retryable: bool) -> None:
    assert is_retryable(exc) is retryable


def test_a_cause_cycle_ends() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert is_retryable(a) is False


def test_error_classes() -> None:
    assert StorageUnavailableError("x").retryable is True
    assert StorageError("x").retryable is False
    missing = CheckpointNotFoundError("no")
    assert isinstance(missing, errors.NotFoundError)
    assert missing.code == "checkpoint_not_found"
    extra = MissingExtraError("s3", "s3fs", "s3")
    assert isinstance(extra, ImportError)
    assert str(extra) == (
        "checkpoint_storage type 's3' needs the s3fs package, which is not installed "
        "(pip install 'stalwart[s3]')"
    )
