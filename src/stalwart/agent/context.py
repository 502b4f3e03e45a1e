"""The model definition of a task: download (``GET /api/v1/tasks/{id}/context_directory``) and
safe extraction of the base64 ``.tar.gz`` into the container's working directory.

Extraction contract: the whole archive is checked before anything is written. A member with an
absolute path or a ``..`` component, a link whose target is absolute or leaves the directory, or
a device / FIFO member makes the archive unsafe (:class:`UnsafeArchiveError`) and nothing is
extracted. ``""`` (no model definition) extracts nothing.
"""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import tarfile
from pathlib import Path
from urllib.parse import quote

import httpx

from stalwart._retry import RetriesExhaustedError, RetryPolicy, send_with_retries
from stalwart.errors import StalwartError

__all__ = [
    "ContextError",
    "UnsafeArchiveError",
    "check_members",
    "extract_context",
    "fetch_context",
    "task_headers",
]

_FETCH_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
FETCH_RETRY = RetryPolicy(initial_backoff_s=0.25, max_backoff_s=4.0, deadline_s=60.0)
"""A master that is stopping or restarting delays a task's start by up to a minute rather
than failing it."""


class ContextError(StalwartError):
    """The model definition cannot be fetched or read."""

    code = "context_unavailable"


class UnsafeArchiveError(ContextError):
    """The model definition archive would write outside the working directory."""

    code = "unsafe_archive"


def task_headers(token: str) -> dict[str, str]:
    """The header a task (or the agent on its behalf) authenticates with."""
    return {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}


def fetch_context(
    client: httpx.Client,
    master_url: str,
    task_id: str,
    token: str,
    *,
    retry: RetryPolicy | None = None,
) -> bytes:
    """The task's model definition as ``.tar.gz`` bytes (``b""`` when it has none).

    Retries as :mod:`stalwart._retry` says (for at most ``retry.deadline_s``). Raises
    ContextError for transport errors, non-200 answers and malformed bodies.
    """
    url = f"{master_url}/api/v1/tasks/{quote(task_id, safe='')}/context_directory"
    try:
        resp = send_with_retries(
            lambda _attempt: client.get(url, headers=task_headers(token), timeout=_FETCH_TIMEOUT),
            method="GET",
            policy=FETCH_RETRY if retry is None else retry,
        )
    except RetriesExhaustedError as exc:
        raise ContextError(f"cannot download the model definition: {exc.problem}") from exc
    except httpx.HTTPError as exc:
        raise ContextError(f"cannot download the model definition: {exc}") from exc
    if resp.status_code != 200:
        raise ContextError(
            f"cannot download the model definition: HTTP {resp.status_code} {resp.text[:200]}"
        )
    try:
        encoded = resp.json()["b64Tgz"]
        return base64.b64decode(encoded, validate=True) if encoded else b""
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ContextError(f"malformed model definition response: {exc}") from exc


def _inside(path: str) -> bool:
    """Whether a relative POSIX path stays inside its root once normalized."""
    normal = posixpath.normpath(path)
    return not posixpath.isabs(normal) and normal != ".." and not normal.startswith("../")


def check_members(members: list[tarfile.TarInfo]) -> None:
    """Raise UnsafeArchiveError unless every member stays inside the extraction directory."""
    for member in members:
        name = member.name
        if posixpath.isabs(name) or name.startswith("\\") or ".." in name.split("/"):
            raise UnsafeArchiveError(f"unsafe path in the model definition: {name!r}")
        if member.issym():
            target = member.linkname
            joined = posixpath.join(posixpath.dirname(name), target)
            if posixpath.isabs(target) or not _inside(joined):
                raise UnsafeArchiveError(
                    f"link {name!r} points outside the model definition: {target!r}"
                )
        elif member.islnk():
            if posixpath.isabs(member.linkname) or not _inside(member.linkname):
                raise UnsafeArchiveError(
                    f"hard link {name!r} points outside the model definition: {member.linkname!r}"
                )
        elif not (member.isfile() or member.isdir()):
            raise UnsafeArchiveError(f"special file in the model definition: {name!r}")


def extract_context(blob: bytes, dest: Path) -> list[str]:
    """Extract a ``.tar.gz`` model definition into ``dest`` (created); the member names.

    Checks every member first (see the module contract), then extracts with tarfile's ``data``
    filter as a second line of defence.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if not blob:
        return []
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
            members = tar.getmembers()
            check_members(members)
            tar.extractall(dest, members=members, filter="data")
    except tarfile.FilterError as exc:  # e.g. a link that leaves through another link
        raise UnsafeArchiveError(f"unsafe model definition: {exc}") from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ContextError(f"cannot extract the model definition: {exc}") from exc
    return [member.name for member in members]
