"""Gitignore rules (``.detignore``, ``.stalwartignore``) for packing a model definition.

:class:`IgnoreRules` follows gitignore's pattern syntax ("gitwildmatch"):

- blank lines and lines starting with ``#`` are skipped; ``\\#`` and ``\\!`` escape them;
  trailing spaces are dropped unless escaped;
- ``!pattern`` re-includes what an earlier pattern excluded; the last matching pattern wins;
- a trailing ``/`` matches directories only;
- a pattern with a ``/`` anywhere but at its end is anchored to the root (a leading ``/`` is
  dropped); otherwise it matches a name at any depth;
- ``*`` and ``?`` never match ``/``; ``[...]`` is a character class (``[!...]`` negates);
  ``**/`` matches any leading directories, ``/**`` everything inside, ``/**/`` zero or more
  directories.

As in git, a file inside an excluded directory cannot be re-included: the packer never
descends into an excluded directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DEFAULT_IGNORE", "IgnoreRules"]

DEFAULT_IGNORE = (
    "__pycache__/",
    "*.py[co]",
    "*$py.class",
    "terraform*",
    ".git/",
    ".vscode/",
    ".idea/",
    ".mypy_cache/",
    "/shared_fs",
)
"""Determined's ``DEFAULT_DETIGNORE``: left out of every model definition."""


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _class(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex of the character class opening at ``start`` and the index after it; None
    when the class is not closed (the ``[`` is then literal)."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    body: list[str] = []
    first = True
    while i < len(pattern) and (pattern[i] != "]" or first):
        char = pattern[i]
        escaped = char == "\\" and i + 1 < len(pattern)
        if escaped:
            i += 1
            char = pattern[i]
        is_range = char == "-" and not escaped and body and pattern[i + 1 : i + 2] not in ("]", "")
        body.append("-" if is_range else re.escape(char))
        first = False
        i += 1
    if i >= len(pattern):
        return None
    joined = "".join(body)
    return ("[^/" + joined + "]" if negate else "[" + joined + "]"), i + 1


def _translate(pattern: str) -> str:
    """The regex body for an anchored pattern (no leading or trailing ``/``)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        at_segment = i == 0 or pattern[i - 1] == "/"
        if at_segment and pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif at_segment and pattern[i:] == "**":
            out.append(".*")
            i = n
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            found = _class(pattern, i)
            if found is None:
                out.append(re.escape("["))
                i += 1
            else:
                out.append(found[0])
                i = found[1]
        elif pattern[i] == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _strip_trailing_spaces(line: str) -> str:
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    return line


def _rule(line: str) -> _Rule | None:
    line = _strip_trailing_spaces(line.rstrip("\r\n"))
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate or line.startswith(("\\!", "\\#")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _translate(line)
    if not anchored:
        body = "(?:.*/)?" + body
    return _Rule(re.compile("^" + body + "$", re.DOTALL), negate, dir_only)


class IgnoreRules:
    """An ordered list of gitignore patterns (see the module docstring)."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self._rules: list[_Rule] = []
        self.extend(lines)

    def extend(self, lines: Iterable[str]) -> None:
        """Append patterns (one per line; comments and blanks are skipped)."""
        for line in lines:
            rule = _rule(line)
            if rule is not None:
                self._rules.append(rule)

    def ignored(self, path: str, *, is_dir: bool) -> bool:
        """Whether ``path`` (relative to the root, ``/``-separated) is excluded by these rules
        alone (excluded parents are the caller's business)."""
        result = False
        for rule in self._rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(path):
                result = not rule.negate
        return result
