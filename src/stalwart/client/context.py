"""Packing a model definition (the context directory) the way Determined's client does.

Contract (wire doc 3.2):

- Every file and directory under the context directory becomes one entry ``{path, type (48 file,
  53 directory), content (base64; "" for directories), mode (full st_mode), mtime (int seconds as
  a string), uid, gid}``, with ``path`` relative and ``/``-separated; the root gets no entry.
- Left out: :data:`~stalwart.client.ignore.DEFAULT_IGNORE`, whatever the root's ``.detignore``
  and ``.stalwartignore`` exclude (gitignore syntax, both files' rules in that order), and the
  two ignore files themselves. Excluded directories are not descended into.
- Each ``include`` is added under its own name (a directory with its own entry, walked with its
  own ignore files). Two entries with the same top-level name are an InvalidArgumentError.
- The decoded content may not exceed :data:`MAX_CONTEXT_BYTES` (Determined's client limit,
  about 95 MiB): PayloadTooLargeError, naming the largest files.
- Entries come in a stable order (sorted walk), so the same directory packs the same way.
- A symbolic link (to a file or a directory) that resolves outside its context directory (or
  outside the included directory it is in) is an InvalidArgumentError naming the link, unless an
  ignore file leaves it out: a model definition carries only what is under its root. Links
  inside are packed as what they point to; dangling links are skipped.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from stalwart.client.ignore import DEFAULT_IGNORE, IgnoreRules
from stalwart.errors import InvalidArgumentError, PayloadTooLargeError

__all__ = ["IGNORE_FILES", "MAX_CONTEXT_BYTES", "ContextFile", "pack_context", "wire_files"]

MAX_CONTEXT_BYTES = (128 * 1024 * 1024 // 8) * 6 - 1024 * 1024
"""The most content bytes a model definition may carry (Determined's ``MAX_CONTEXT_SIZE``)."""

IGNORE_FILES = (".detignore", ".stalwartignore")
"""Ignore files read at the root of a context directory (and of each included directory)."""

FILE_TYPE = 48  # ord(tarfile.REGTYPE)
DIR_TYPE = 53  # ord(tarfile.DIRTYPE)


@dataclass(frozen=True)
class ContextFile:
    """One entry of a packed model definition."""

    path: str
    is_dir: bool
    mode: int
    mtime: int
    content: bytes = b""

    def to_wire(self) -> dict[str, object]:
        """The ``v1File`` JSON object."""
        return {
            "path": self.path,
            "type": DIR_TYPE if self.is_dir else FILE_TYPE,
            "content": base64.b64encode(self.content).decode("ascii"),
            "mode": self.mode,
            "mtime": str(self.mtime),
            "uid": 0,
            "gid": 0,
        }


def _rules(root: Path) -> IgnoreRules:
    rules = IgnoreRules(DEFAULT_IGNORE)
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            rules.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return rules


def _entry(path: Path, rel: str, *, is_dir: bool) -> ContextFile:
    info = path.stat()
    content = b"" if is_dir else path.read_bytes()
    return ContextFile(rel, is_dir, info.st_mode, int(info.st_mtime), content)


def _check_link(path: Path, root: Path, rel: str) -> None:
    """InvalidArgumentError when ``path`` is a link resolving outside ``root`` (resolved)."""
    if not path.is_symlink():
        return
    target = path.resolve()
    if target.exists() and target != root and root not in target.parents:
        raise InvalidArgumentError(
            f"model definition: {rel} is a link to {target}, outside the context directory {root}",
            hint="copy what it points to into the context, or leave the link out with a "
            ".stalwartignore (gitignore syntax)",
        )


def _walk(root: Path, prefix: str) -> Iterator[ContextFile]:
    """Entries under ``root``, their paths prefixed by ``prefix`` (``""`` or ``"name/"``)."""
    rules = _rules(root)
    real_root = root.resolve()
    for current, dirs, files in os.walk(root):
        base = Path(current).relative_to(root).as_posix()
        base = "" if base == "." else base + "/"
        kept_dirs = []
        for name in sorted(dirs):
            if not rules.ignored(base + name, is_dir=True):
                _check_link(Path(current) / name, real_root, prefix + base + name)
                kept_dirs.append(name)
                yield _entry(Path(current) / name, prefix + base + name, is_dir=True)
        dirs[:] = kept_dirs
        for name in sorted(files):
            rel = base + name
            if (not base and name in IGNORE_FILES) or rules.ignored(rel, is_dir=False):
                continue
            full = Path(current) / name
            _check_link(full, real_root, prefix + rel)
            try:
                regular = stat.S_ISREG(full.stat().st_mode)
            except OSError:
                regular = False  # a dangling link
            if not regular:
                continue  # sockets, fifos, dangling links
            yield _entry(full, prefix + rel, is_dir=False)


def pack_context(context_dir: Path | None, includes: Iterable[Path] = ()) -> list[ContextFile]:
    """The model definition of ``context_dir`` plus ``includes`` (see the module contract)."""
    entries: list[ContextFile] = []
    if context_dir is not None:
        if not context_dir.is_dir():
            raise InvalidArgumentError(
                f"context directory {context_dir} does not exist or is not a directory",
                hint="pass the directory holding your training code",
            )
        entries.extend(_walk(context_dir, ""))
    for include in includes:
        if not include.exists():
            raise InvalidArgumentError(f"included path {include} does not exist")
        name = include.resolve().name
        if include.is_dir():
            entries.append(_entry(include, name, is_dir=True))
            entries.extend(_walk(include, name + "/"))
        else:
            entries.append(_entry(include, name, is_dir=False))
    _check_duplicates(entries)
    _check_size(entries)
    return entries


def _check_duplicates(entries: list[ContextFile]) -> None:
    seen: set[str] = set()
    for entry in entries:
        if "/" in entry.path:
            continue
        if entry.path in seen:
            raise InvalidArgumentError(
                f"two entries of the model definition are named {entry.path!r}",
                hint="an --include has the name of a file or directory of the context",
            )
        seen.add(entry.path)


def _check_size(entries: list[ContextFile]) -> None:
    total = sum(len(e.content) for e in entries)
    if total <= MAX_CONTEXT_BYTES:
        return
    largest = sorted(entries, key=lambda e: len(e.content), reverse=True)[:3]
    names = ", ".join(f"{e.path} ({len(e.content) / 2**20:.1f} MiB)" for e in largest)
    raise PayloadTooLargeError(
        f"the model definition is {total / 2**20:.1f} MiB, over the limit of "
        f"{MAX_CONTEXT_BYTES / 2**20:.0f} MiB (largest: {names})",
        hint="leave data and outputs out with a .stalwartignore (gitignore syntax)",
    )


def wire_files(entries: Iterable[ContextFile]) -> list[dict[str, object]]:
    """The ``modelDefinition`` list of a create-experiment request."""
    return [entry.to_wire() for entry in entries]
