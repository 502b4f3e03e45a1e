"""Turning pydantic errors into problems a person can act on.

Every problem names its path in the config and, where the YAML was read from a file, its line:
``<config>.searcher.max_trials (line 12): must be >= 1``. Unknown keys and misspelt choices get a
"did you mean" hint. All problems of a document are reported at once.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from typing_extensions import TypeAliasType

from stalwart.config.loader import DataPath, LineMap, format_path

__all__ = ["Problem", "did_you_mean", "problems_from_error", "render_problems"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config, at one path."""

    path: DataPath
    message: str
    line: int | None = None

    def render(self, root: str = "<config>") -> str:
        """``<config>.a.b (line 3): message``."""
        where = format_path(self.path, root)
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"


def render_problems(problems: Iterable[Problem]) -> list[str]:
    """One line per problem, in document order (problems without a line last)."""
    ordered = sorted(problems, key=lambda p: (p.line is None, p.line or 0, p.path.__repr__()))
    return [p.render() for p in ordered]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice, or ``""`` if none is close."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


def _data_path(loc: Sequence[int | str], data: Any, *, missing: bool) -> DataPath:
    """Map a pydantic location to a path in the data, dropping union tags.

    A location element that is not a key (or index) of the data at that point is a union tag,
    unless it is the last element of a ``missing`` error (the missing field), which is kept.
    """
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        found, child = _child(node, part)
        if found:
            path.append(part)
            node = child
        elif last and missing:
            path.append(part)
            node = None
    return tuple(path)


def _child(node: Any, part: int | str) -> tuple[bool, Any]:
    """``(True, node[part])`` if the data has that key or index, else ``(False, None)``."""
    if isinstance(node, dict) and part in node:
        return True, node[part]
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return True, node[part]
    return False, None


def _members(tp: Any) -> list[tuple[Any, str | None]]:
    """Concrete alternatives of a type, each with its union tag if it has one."""
    if isinstance(tp, TypeAliasType):
        return _members(tp.__value__)
    if isinstance(tp, typing.ForwardRef):
        return []
    origin = get_origin(tp)
    if origin is typing.Annotated:
        inner, *meta = get_args(tp)
        tag = next((m.tag for m in meta if type(m).__name__ == "Tag"), None)
        return [(m, tag or t) for m, t in _members(inner)]
    if origin in (Union, types.UnionType):
        out: list[tuple[Any, str | None]] = []
        for arg in get_args(tp):
            out.extend(_members(arg))
        return out
    return [(tp, None)]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _tags_of(tp: Any, tag: str | None) -> set[str]:
    tags = {tag} if tag else set()
    if _is_model(tp):
        tags.add(tp.__name__)
        for name in ("name", "type"):
            field = tp.model_fields.get(name)
            if field is not None and get_origin(field.annotation) is typing.Literal:
                tags.update(str(a) for a in get_args(field.annotation))
    return tags


def _step(tp: Any, part: int | str) -> list[Any]:
    """Types reached from ``tp`` by one location element."""
    out: list[Any] = []
    for member, tag in _members(tp):
        origin = get_origin(member)
        if isinstance(part, str) and part in _tags_of(member, tag):
            out.append(member)  # a union tag: stay on this alternative
        elif _is_model(member) and isinstance(part, str) and part in member.model_fields:
            out.append(member.model_fields[part].annotation)
        elif origin in (list, tuple) and isinstance(part, int):
            out.append(get_args(member)[0])
        elif origin is dict and isinstance(part, str):
            out.append(get_args(member)[1])
    return out


def _field_names_at(root: Any, loc: Sequence[int | str]) -> list[str]:
    """Field names of the model(s) at ``loc`` (for "did you mean" on unknown keys)."""
    current = [root]
    for part in loc:
        current = [nxt for tp in current for nxt in _step(tp, part)]
    names: list[str] = []
    for tp in current:
        for member, _tag in _members(tp):
            if _is_model(member):
                names.extend(member.model_fields)
    return names


_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: ErrorDetails, root: Any) -> str:
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    loc = err["loc"]
    given = err.get("input")
    if kind == "missing":
        return "required, but not set"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        return f"unknown key '{key}'" + did_you_mean(key, _field_names_at(root, loc[:-1]))
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]} (got {_show(given)})"
    bounds = {
        "greater_than_equal": ("ge", ">="),
        "greater_than": ("gt", ">"),
        "less_than_equal": ("le", "<="),
        "less_than": ("lt", "<"),
    }
    if kind in bounds:
        key, sign = bounds[kind]
        return f"must be {sign} {ctx.get(key)} (got {_show(given)})"
    if kind == "literal_error":
        hint = did_you_mean(str(given), [s.strip("' ") for s in _split_expected(ctx)])
        return f"must be one of {ctx.get('expected')} (got {_show(given)}){hint}"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} item(s)"
    if kind == "union_tag_invalid":
        tag = str(ctx.get("tag"))
        expected = _split_expected(ctx, "expected_tags")
        field = str(ctx.get("discriminator", "")).strip("'")
        return f"unknown {field} '{tag}'; expected one of {', '.join(expected)}" + did_you_mean(
            tag, expected
        )
    if kind == "union_tag_not_found":
        field = str(ctx.get("discriminator", "")).strip("'")
        return f"'{field}' is required here"
    if kind == "unknown_hyperparameter_type":
        from stalwart.config.hyperparameters import HYPERPARAMETER_TYPES

        tag = str(given.get("type")) if isinstance(given, dict) else "?"
        return (
            f"unknown hyperparameter type '{tag}'; expected one of "
            f"{', '.join(HYPERPARAMETER_TYPES)}" + did_you_mean(tag, HYPERPARAMETER_TYPES)
        )
    if kind in ("value_error", "assertion_error"):
        return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = str(err["msg"])
    return msg[:1].lower() + msg[1:]


def _split_expected(ctx: dict[str, Any], key: str = "expected") -> list[str]:
    text = str(ctx.get(key, ""))
    parts = text.replace(" or ", ", ").split(",")
    return [p.strip().strip("'") for p in parts if p.strip()]


def problems_from_error(
    exc: ValidationError, root: Any, data: Any, lines: LineMap | None = None
) -> list[Problem]:
    """One Problem per pydantic error, with data paths, lines and readable messages.

    ``root`` is the validated type (a model class or annotation); ``data`` the raw input.
    Errors that are only echoes of an earlier one at the same path are dropped.
    """
    problems: list[Problem] = []
    seen: set[tuple[DataPath, str]] = set()
    for err in exc.errors(include_url=False):
        path = _data_path(err["loc"], data, missing=err["type"] == "missing")
        message = _message(err, root)
        if (path, message) in seen:
            continue
        seen.add((path, message))
        line = lines.line_of(path) if lines else None
        problems.append(Problem(path, message, line))
    return problems
