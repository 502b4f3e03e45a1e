"""YAML loading with line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.config.loader import LineMap, format_path, parse_yaml, read_yaml
from stalwart.errors import ConfigError


def test_lines_of_keys_and_items() -> None:
    doc = parse_yaml(
        "name: x\nsearcher:\n  name: single\n  metric: loss\nlabels:\n  - a\n  - b\n", "f.yaml"
    )
    assert doc.data["searcher"]["metric"] == "loss"
    assert doc.lines.line_of(("searcher", "metric")) == 4
    assert doc.lines.line_of(("labels", 1)) == 7
    # An unknown child falls back to its nearest known ancestor.
    assert doc.lines.line_of(("searcher", "max_trials")) == 2
    assert doc.lines.line_of(("nothing",)) is None


def test_empty_document_is_an_empty_mapping() -> None:
    assert parse_yaml("# only a comment\n").data == {}


def test_syntax_error_names_the_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("name: x\nsearcher: [unclosed\nother: 1\n", "bad.yaml")
    assert info.value.source == "bad.yaml"
    assert "YAML syntax error at line" in info.value.problems[0]


@pytest.mark.parametrize(("text", "line"), [("<<", 1), ("name: x\nlabels: <<\n", 2)])
def test_a_bare_merge_key_says_what_it_is_and_where(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "bad.yaml")
    (problem,) = info.value.problems
    assert problem.startswith(f"YAML error at line {line}, column ")
    assert "merge key" in problem
    assert "quote it" in problem


def test_duplicate_keys_are_errors_with_both_lines() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("name: a\nmax_restarts: 1\nname: b\n")
    (problem,) = info.value.problems
    assert problem.startswith("<config>.name (line 3): duplicate key")
    assert "line 1" in problem


def test_several_documents_are_rejected() -> None:
    with pytest.raises(ConfigError, match="several YAML documents"):
        parse_yaml("a: 1\n---\nb: 2\n")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        read_yaml(tmp_path / "missing.yaml")


def test_format_path() -> None:
    assert format_path(("bind_mounts", 0, "host_path")) == "<config>.bind_mounts[0].host_path"
    assert format_path(()) == "<config>"
    assert LineMap().line_of(("a",)) is None


def test_keys_and_dates_as_json_gives_them() -> None:
    doc = parse_yaml("ports:\n  8080: 8080\nflags:\n  yes: 1\nwhen: 2024-06-12\n")
    assert doc.data == {"ports": {"8080": 8080}, "flags": {"true": 1}, "when": "2024-06-12"}
    assert doc.lines.line_of(("ports", "8080")) == 2
    assert doc.lines.line_of(("flags", "true")) == 4
