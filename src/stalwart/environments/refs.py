"""Finding image references in a repository's text files (for ``envs bump`` and ``envs check``).

A *reference* is ``<repository>:<tag>`` where the repository belongs to a manifest family that
follows the environments tag, e.g. ``determinedai/pytorch-ngc-dev:<tag>`` (a registry host in
front, such as ``docker.io/``, is allowed). A line that contains :data:`IGNORE_MARKER` is never
reported or rewritten: use it for historical tags that docs mention on purpose.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IGNORE_MARKER",
    "MAX_TEXT_BYTES",
    "Reference",
    "find_references",
    "read_text",
    "reference_pattern",
    "repository_files",
    "rewrite_references",
]

IGNORE_MARKER = "envs-check: ignore"
"""A line containing this text is skipped by ``envs check`` and left alone by ``envs bump``."""

MAX_TEXT_BYTES = 8 * 1024 * 1024
"""Files larger than this are not scanned."""

_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "build", "dist", "venv"})
# A tag never ends in '.' or '-' here, so "...:0736b6d." at the end of a sentence reads right.
_TAG = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9_])?"


@dataclass(frozen=True)
class Reference:
    """One image reference on one line (``line`` is 1-based)."""

    line: int
    repository: str
    tag: str

    @property
    def image(self) -> str:
        """``repository:tag``."""
        return f"{self.repository}:{self.tag}"


def reference_pattern(repositories: Iterable[str]) -> re.Pattern[str]:
    """A regex matching ``<repo>:<tag>`` for the given repositories, not inside a longer name."""
    names = sorted(set(repositories), key=lambda r: (-len(r), r))
    if not names:
        return re.compile(r"(?!)")
    alternation = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![A-Za-z0-9_.-])(?P<repo>{alternation}):(?P<tag>{_TAG})")


def find_references(text: str, pattern: re.Pattern[str]) -> Iterator[Reference]:
    """Every reference in ``text``, in order, skipping lines with the ignore marker."""
    for number, line in enumerate(text.split("\n"), 1):
        if IGNORE_MARKER in line:
            continue
        for match in pattern.finditer(line):
            yield Reference(number, match["repo"], match["tag"])


def rewrite_references(
    text: str, pattern: re.Pattern[str], tag: str
) -> tuple[str, list[tuple[int, str, str]]]:
    """Give every reference in ``text`` the tag ``tag``; return the text and ``(line, old, new)``.

    Lines with the ignore marker are left alone; line endings are preserved.
    """
    changes: list[tuple[int, str, str]] = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if IGNORE_MARKER in line:
            continue

        def replace(match: re.Match[str], number: int = index + 1) -> str:
            if match["tag"] == tag:
                return match[0]
            new = f"{match['repo']}:{tag}"
            changes.append((number, match[0], new))
            return new

        lines[index] = pattern.sub(replace, line)
    return "\n".join(lines), changes


def read_text(path: Path) -> str | None:
    """The file's text as UTF-8, or None if it is binary, undecodable, too large or unreadable."""
    try:
        if path.stat().st_size > MAX_TEXT_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _git_files(root: Path) -> list[str] | None:
    try:
        proc = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return [p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _walked_files(root: Path) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and d not in _SKIP_DIRS
            and not d.endswith(".egg-info")
            and not (here / d / "pyvenv.cfg").exists()
        )
        for name in sorted(filenames):
            yield (here / name).relative_to(root).as_posix()


def repository_files(root: Path) -> list[str]:
    """Files to scan, as sorted POSIX paths relative to ``root``.

    In a git work tree: tracked files plus untracked ones that are not ignored
    (``git ls-files --cached --others --exclude-standard``). Elsewhere (or without git): a walk
    that skips hidden directories, virtual environments, ``node_modules``, caches and build output.
    """
    listed = _git_files(root)
    names = listed if listed is not None else _walked_files(root)
    return sorted({n for n in names if (root / n).is_file() and not (root / n).is_symlink()})
