"""Renders the Helm chart ``helm/stalwart`` the way ``helm template`` does, for the tests.

``helm`` is not packaged by Debian (the only source of binaries on the machines that run
``make test``), so the chart's tests render it here. Honesty rules that keep this faithful:

- the chart's templates use a small subset of Helm's template language, and this renderer
  implements exactly that subset: actions ``{{ }}`` with ``{{-``/``-}}`` whitespace trimming;
  ``if``/``else``/``end``, ``define``/``end``; pipelines of ``.Values.*``, ``.Release.*``,
  ``.Chart.*``, string and number literals and parenthesized sub-pipelines; the functions in
  :data:`FUNCTIONS` with Helm's semantics (``toYaml`` drops the final newline, ``nindent`` starts
  with a newline, ``default`` takes the fallback first, missing values render empty...);
- anything else raises :class:`UnsupportedTemplateError`: a template that strays beyond the subset
  fails the tests instead of rendering wrongly;
- when a ``helm`` binary is on ``PATH``, the tests also run ``helm template`` and compare.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["FUNCTIONS", "UnsupportedTemplateError", "render_chart"]


class UnsupportedTemplateError(Exception):
    """The template uses something outside the supported subset."""


_ACTION = re.compile(r"\{\{(-?)\s?(.*?)\s?(-?)\}\}", re.DOTALL)


@dataclass
class _Node:
    kind: str  # text, action, if, define, root
    value: str = ""
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    for match in _ACTION.finditer(text):
        chunk = text[pos : match.start()]
        if match.group(1):
            chunk = chunk.rstrip(" \t\r\n")
        out.append(("text", chunk))
        out.append(("action", match.group(2).strip()))
        pos = match.end()
        if match.group(3):
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
    out.append(("text", text[pos:]))
    return out


def _parse(text: str) -> _Node:
    root = _Node("root")
    stack = [root]
    in_else = [False]
    for kind, value in _tokens(text):
        target = stack[-1].orelse if in_else[-1] else stack[-1].body
        if kind == "text":
            target.append(_Node("text", value))
        elif value.startswith("/*"):
            continue
        elif value.startswith("if "):
            node = _Node("if", value[3:].strip())
            target.append(node)
            stack.append(node)
            in_else.append(False)
        elif value.startswith("define "):
            node = _Node("define", json.loads(value[7:].strip()))
            target.append(node)
            stack.append(node)
            in_else.append(False)
        elif value == "else":
            in_else[-1] = True
        elif value == "end":
            stack.pop()
            in_else.pop()
        elif value.split(" ", 1)[0] in ("range", "with", "template", "block", "else if"):
            raise UnsupportedTemplateError(f"unsupported action {{{{ {value} }}}}")
        else:
            target.append(_Node("action", value))
    if len(stack) != 1:
        raise UnsupportedTemplateError("unbalanced if/define/end")
    return root


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "", {}, [])


def _to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")


def _string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _printf(fmt: str, *args: Any) -> str:
    return re.sub(r"%[sdv]", "{}", fmt).format(*(_string(a) for a in args))


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "quote": lambda v: json.dumps(_string(v)),
    "nindent": lambda n, v: (
        "\n" + "\n".join(" " * int(n) + line for line in _string(v).split("\n"))
    ),
    "indent": lambda n, v: "\n".join(" " * int(n) + line for line in _string(v).split("\n")),
    "toYaml": _to_yaml,
    "default": lambda fallback, v=None: v if _truthy(v) else fallback,
    "printf": _printf,
    "trunc": lambda n, v: _string(v)[: int(n)],
    "trimSuffix": lambda suffix, v: _string(v).removesuffix(suffix),
    "b64enc": lambda v: base64.b64encode(_string(v).encode()).decode(),
    "randAlphaNum": lambda n: "".join(
        secrets.choice(string.ascii_letters + string.digits) for _ in range(int(n))
    ),
}
"""The template functions the chart may use (Helm's argument order: piped value last)."""

_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\(|\)|[^\s()]+)')


class _Renderer:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context
        self.defines: dict[str, _Node] = {}

    def collect(self, node: _Node) -> None:
        for child in node.body:
            if child.kind == "define":
                self.defines[child.value] = child

    def render(self, nodes: list[_Node], dot: Any) -> str:
        out = []
        for node in nodes:
            if node.kind == "text":
                out.append(node.value)
            elif node.kind == "action":
                out.append(_string(self.pipeline(node.value, dot)))
            elif node.kind == "if":
                branch = node.body if _truthy(self.pipeline(node.value, dot)) else node.orelse
                out.append(self.render(branch, dot))
        return "".join(out)

    def pipeline(self, text: str, dot: Any) -> Any:
        tokens = [t for t in _TOKEN.findall(text) if t]
        value, pos = self._pipe(tokens, 0, dot)
        if pos != len(tokens):
            raise UnsupportedTemplateError(f"cannot parse {text!r}")
        return value

    def _pipe(self, tokens: list[str], pos: int, dot: Any) -> tuple[Any, int]:
        value: Any = None
        first = True
        while pos < len(tokens) and tokens[pos] != ")":
            args: list[Any] = []
            name = tokens[pos]
            is_function = name in FUNCTIONS or name == "include"
            if not is_function and not first:
                raise UnsupportedTemplateError(f"unknown function {name!r}")
            if is_function:
                pos += 1
            while pos < len(tokens) and tokens[pos] not in ("|", ")"):
                arg, pos = self._operand(tokens, pos, dot)
                args.append(arg)
            if not first:
                args.append(value)
            if name == "include":
                value = self._include(*args)
            elif is_function:
                value = FUNCTIONS[name](*args)
            else:
                if len(args) != 1:
                    raise UnsupportedTemplateError(f"unknown function {name!r}")
                value = args[0]
            first = False
            if pos < len(tokens) and tokens[pos] == "|":
                pos += 1
        return value, pos

    def _operand(self, tokens: list[str], pos: int, dot: Any) -> tuple[Any, int]:
        token = tokens[pos]
        if token == "(":
            value, pos = self._pipe(tokens, pos + 1, dot)
            return value, pos + 1
        if token.startswith('"'):
            return json.loads(token), pos + 1
        if re.fullmatch(r"-?\d+", token):
            return int(token), pos + 1
        if token in ("true", "false"):
            return token == "true", pos + 1
        if token == ".":
            return dot, pos + 1
        if token.startswith("."):
            found: Any = dot
            for part in token[1:].split("."):
                found = found.get(part) if isinstance(found, Mapping) else None
            return found, pos + 1
        raise UnsupportedTemplateError(f"unsupported operand {token!r}")

    def _include(self, name: str, dot: Any) -> str:
        if name not in self.defines:
            raise UnsupportedTemplateError(f"no template named {name!r}")
        return self.render(self.defines[name].body, dot)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def render_chart(
    chart: Path,
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "stalwart",
    namespace: str = "stalwart",
) -> list[dict[str, Any]]:
    """Every object the chart renders with ``values`` over its ``values.yaml``, in template
    file order (``helm template`` semantics; see the module docstring)."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    defaults = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    context = {
        "Values": _merge(defaults, values or {}),
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm"},
        "Chart": {
            "Name": meta["name"],
            "Version": meta["version"],
            "AppVersion": meta["appVersion"],
        },
    }
    renderer = _Renderer(context)
    templates = sorted((chart / "templates").iterdir())
    parsed = {path: _parse(path.read_text()) for path in templates}
    for path, root in parsed.items():
        if path.suffix == ".tpl":
            renderer.collect(root)
    for root in parsed.values():
        renderer.collect(root)
    objects: list[dict[str, Any]] = []
    for path, root in parsed.items():
        if path.suffix == ".tpl":
            continue
        text = renderer.render(root.body, context)
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects
