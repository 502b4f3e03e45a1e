"""Model definitions: the ``v1File`` list a client uploads, stored as one ``.tar.gz``.

Contract of :func:`build_archive`: every entry is a regular file (type 48) or a directory (53)
at a relative POSIX path inside the context (no absolute paths, no ``..``, no NUL); links and
device files are refused, since they could point outside the context; no name is longer than
:data:`MAX_NAME_BYTES` and no path than :data:`MAX_PATH_BYTES` (what a Linux file system
takes); no path is both a file and a directory (``x`` and ``x/y``); the decoded contents add
up to at most ``max_bytes``. Any violation raises before anything is stored.
:func:`extract_archive` applies the same path rules when unpacking (tasks, downloads).
"""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from stalwart.errors import InvalidArgumentError, PayloadTooLargeError

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "archive_members",
    "build_archive",
    "extract_archive",
    "safe_member_path",
]

MAX_NAME_BYTES = 255
"""Longest file or directory name (UTF-8 bytes), Linux's NAME_MAX."""
MAX_PATH_BYTES = 4096
"""Longest relative path (UTF-8 bytes), Linux's PATH_MAX."""

REGTYPE = ord(tarfile.REGTYPE)  # 48
DIRTYPE = ord(tarfile.DIRTYPE)  # 53


def safe_member_path(path: str) -> str:
    """The normalized relative path, or InvalidArgumentError if it could leave the context."""
    if not path or "\x00" in path or "\\" in path:
        raise InvalidArgumentError(f"model definition: invalid file path {path!r}")
    if path.startswith("/"):
        raise InvalidArgumentError(f"model definition: absolute path {path!r} is not allowed")
    norm = posixpath.normpath(path)
    if norm == ".." or norm.startswith("../") or norm == ".":
        raise InvalidArgumentError(
            f"model definition: path {path!r} points outside the context directory"
        )
    if len(norm.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise InvalidArgumentError(
            f"model definition: path {_short(norm)} is too long (over {MAX_PATH_BYTES} bytes); "
            "shorten it or leave the file out with a .detignore"
        )
    for name in norm.split("/"):
        if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise InvalidArgumentError(
                f"model definition: the name {_short(name)} is too long (over {MAX_NAME_BYTES} "
                "bytes); rename it or leave it out with a .detignore"
            )
    return norm


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:40] + "..." + text[-10:])


class _Layout:
    """Paths seen so far: refuses a path used twice, or as both a file and a directory."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.listed_dirs: set[str] = set()
        self.dirs: set[str] = set()  # listed and implied (parents of every entry)

    def add(self, path: str, *, is_dir: bool) -> None:
        if path in self.files or path in self.listed_dirs:
            raise InvalidArgumentError(f"model definition: {path!r} is listed twice")
        if not is_dir and path in self.dirs:
            raise InvalidArgumentError(
                f"model definition: {path!r} is a file, and a directory of files listed too; "
                "rename one of them"
            )
        parent = posixpath.dirname(path)
        while parent:
            if parent in self.files:
                raise InvalidArgumentError(
                    f"model definition: {parent!r} is a file, and a directory of {path!r} too; "
                    "rename one of them"
                )
            self.dirs.add(parent)
            parent = posixpath.dirname(parent)
        if is_dir:
            self.listed_dirs.add(path)
            self.dirs.add(path)
        else:
            self.files.add(path)


def _field(entry: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in entry:
            return entry[name]
    return None


def _int_field(entry: Mapping[str, Any], name: str, default: int, path: str) -> int:
    """``entry[name]`` as an integer (a number or a string of digits, as the official client
    sends ``mtime``); ``default`` when absent or empty; otherwise a 400 naming the file."""
    value = _field(entry, name)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidArgumentError(f"model definition: {path!r} {name} is not a number")
    try:
        return int(value)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgumentError(f"model definition: {path!r} {name} is not a number") from exc


def build_archive(files: Iterable[Mapping[str, Any]], *, max_bytes: int) -> bytes:
    """A ``.tar.gz`` of the uploaded ``v1File`` entries (see the module contract)."""
    buffer = io.BytesIO()
    total = 0
    layout = _Layout()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for entry in files:
            path = safe_member_path(str(_field(entry, "path") or ""))
            kind = _int_field(entry, "type", REGTYPE, path) or REGTYPE
            layout.add(path, is_dir=kind == DIRTYPE)
            info = tarfile.TarInfo(path)
            info.mode = (_int_field(entry, "mode", 0o644, path) or 0o644) & 0o7777
            info.mtime = _int_field(entry, "mtime", 0, path)
            if kind == DIRTYPE:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            if kind != REGTYPE:
                raise InvalidArgumentError(
                    f"model definition: {path!r} is not a regular file or directory "
                    f"(type {kind}); links are not allowed, copy the file into the context"
                )
            try:
                content = base64.b64decode(str(_field(entry, "content") or ""), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InvalidArgumentError(
                    f"model definition: {path!r} content is not valid base64"
                ) from exc
            total += len(content)
            if total > max_bytes:
                raise PayloadTooLargeError(
                    f"model definition is over the limit of {max_bytes} bytes; exclude large "
                    "files with a .detignore (or .stalwartignore) file"
                )
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def archive_members(blob: bytes) -> list[tarfile.TarInfo]:
    """The entries of a stored archive."""
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return tar.getmembers()


def extract_archive(blob: bytes, dest: Path) -> list[Path]:
    """Unpack a model-definition archive into ``dest``; returns the files written.

    Only regular files and directories at safe relative paths are extracted.
    """
    written: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():
            rel = safe_member_path(member.name)
            target = dest / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                target.write_bytes(source.read() if source else b"")
                target.chmod(member.mode & 0o777 or 0o644)
                written.append(target)
            else:
                raise InvalidArgumentError(f"model definition: {rel!r} is not a file")
    return written
