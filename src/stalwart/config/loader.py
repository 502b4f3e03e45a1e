"""YAML loading that remembers where every key and item came from.

:func:`parse_yaml` returns the plain data and a :class:`LineMap` from data paths
(``("searcher", "max_trials")``, ``("bind_mounts", 0)``) to 1-based line numbers, so validation
messages can say ``<config>.searcher.max_trials (line 12)``. YAML syntax errors and duplicate keys
are reported as :class:`~stalwart.errors.ConfigError` with their line.

Hostile input is refused as a ConfigError too, before it costs memory or time: aliases that
expand past :data:`ALIAS_EXPANSION_BUDGET` nodes (a "billion laughs" document is a few hundred
bytes that expand to billions of nodes) and nesting deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stalwart.errors import ConfigError

__all__ = [
    "ALIAS_EXPANSION_BUDGET",
    "MAX_DEPTH",
    "DataPath",
    "LineMap",
    "ParsedDocument",
    "format_path",
    "parse_yaml",
    "read_yaml",
]

ALIAS_EXPANSION_BUDGET = 10_000
"""The most nodes that aliases (``*name``) may add to a document once expanded. A config
reuses a few anchored blocks (a few hundred nodes); past this it is refused."""

MAX_DEPTH = 200
"""The deepest nesting of mappings and lists a config may have."""

_ALIAS_BUDGET_PROBLEM = (
    "its aliases (*name) expand to more than {budget} nodes: a config that size is refused "
    '(it may be a "billion laughs" document); write the repeated blocks out, or reuse fewer'
)
_DEPTH_PROBLEM = (
    "nested more than {depth} levels deep (mappings and lists inside each other); "
    "flatten the config"
)

DataPath = tuple[str | int, ...]
"""A path into parsed YAML data: mapping keys and list indices."""


@dataclass(frozen=True)
class LineMap:
    """Line numbers of the keys and list items of one YAML document."""

    lines: Mapping[DataPath, int] = field(default_factory=dict)

    def line_of(self, path: DataPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one; None if unknown."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None


@dataclass(frozen=True)
class ParsedDocument:
    """One parsed YAML document: where it came from, its data and its line map."""

    source: str
    data: Any
    lines: LineMap


def format_path(path: DataPath, root: str = "<config>") -> str:
    """``("searcher", "max_trials")`` -> ``<config>.searcher.max_trials``; indices as ``[0]``."""
    out = root
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _scalar_key(node: yaml.Node) -> str:
    """A key as _json_like spells it (``yes``/``True`` -> ``true``; numbers as written)."""
    value = node.value
    if not isinstance(value, str):
        return str(value)
    if node.tag == "tag:yaml.org,2002:bool":
        return "true" if value.lower() in ("true", "yes", "on", "y") else "false"
    if node.tag == "tag:yaml.org,2002:null":
        return "null"
    return value


class _Walk:
    """Counts the nodes a walk visits (aliases expanded) against the budget."""

    def __init__(self) -> None:
        self.visits = 0
        self.distinct: set[int] = set()

    def visit(self, node: yaml.Node, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _RefusedError(_DEPTH_PROBLEM.format(depth=MAX_DEPTH))
        self.visits += 1
        self.distinct.add(id(node))
        if self.visits - len(self.distinct) > ALIAS_EXPANSION_BUDGET:
            raise _RefusedError(_ALIAS_BUDGET_PROBLEM.format(budget=ALIAS_EXPANSION_BUDGET))


class _RefusedError(Exception):
    """A document refused before it is turned into data (the message is the problem)."""


def _collect(
    node: yaml.Node,
    path: DataPath,
    lines: dict[DataPath, int],
    problems: list[str],
    walk: _Walk | None = None,
) -> None:
    walk = walk or _Walk()
    walk.visit(node, len(path))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = _scalar_key(key_node)
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":
                problems.append(
                    f"{format_path((*path, key))} (line {line}): duplicate key "
                    f"(first set on line {seen[key]}); keep one"
                )
            seen[key] = line
            lines[(*path, key)] = line
            _collect(value_node, (*path, key), lines, problems, walk)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _collect(item, (*path, index), lines, problems, walk)


def parse_yaml(text: str, source: str = "<string>") -> ParsedDocument:
    """Parse one YAML document with line numbers.

    Raises ConfigError for syntax errors, duplicate keys and multi-document streams. An empty
    document parses to ``{}``.
    """
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        raise ConfigError(source, [f"YAML syntax error at {where}: {exc.problem}"]) from exc
    except yaml.reader.ReaderError as exc:
        raise ConfigError(source, [_reader_problem(text, exc)]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(source, [f"YAML error: {exc}"]) from exc
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(source, [_DEPTH_PROBLEM.format(depth=MAX_DEPTH)]) from None
    nodes = [n for n in nodes if n is not None]
    if len(nodes) > 1:
        line = nodes[1].start_mark.line + 1
        raise ConfigError(
            source,
            [f"line {line}: holds several YAML documents (the second starts here); keep one"],
        )
    if not nodes:
        return ParsedDocument(source, {}, LineMap())
    lines: dict[DataPath, int] = {}
    problems: list[str] = []
    try:
        _collect(nodes[0], (), lines, problems)
    except _RefusedError as exc:
        raise ConfigError(source, [str(exc)]) from None
    if problems:
        raise ConfigError(source, problems)
    try:
        data = _json_like(yaml.safe_load(text))
    except yaml.MarkedYAMLError as exc:  # well-formed, but not data (a bare `<<` merge key)
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        problem = str(exc.problem)
        if "2002:merge" in problem:
            problem = (
                "`<<` is YAML's merge key (`<<: *anchor` merges a mapping); quote it ('<<') "
                "to mean the text"
            )
        raise ConfigError(source, [f"YAML error at {where}: {problem}"]) from exc
    return ParsedDocument(source, {} if data is None else data, LineMap(lines))


def _reader_problem(text: str, exc: yaml.reader.ReaderError) -> str:
    """A character YAML does not allow (a control character), with its line and column."""
    before = text[: exc.position]
    line = before.count("\n") + 1
    column = exc.position - (before.rfind("\n") + 1) + 1
    character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1])
    return (
        f"YAML error at line {line}, column {column}: character U+{character:04X} is not "
        "allowed in YAML; remove it or write it as an escape in a double-quoted string"
    )


def _json_like(value: Any) -> Any:
    """The data as its JSON form would give it, as Determined's client sends configs.

    Mapping keys become strings (``8080: x`` -> ``"8080"``, ``true`` -> ``"true"``) and dates
    become ISO strings; everything else is unchanged.
    """
    if isinstance(value, dict):
        return {_json_key(k): _json_like(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_like(v) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    return str(key)


def read_yaml(path: Path) -> ParsedDocument:
    """Read and parse a YAML file; an unreadable file is a ConfigError naming the path."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), ["is not UTF-8 text"]) from exc
    return parse_yaml(text, str(path))
