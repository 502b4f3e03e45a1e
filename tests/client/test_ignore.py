"""Gitignore semantics of ``.detignore`` / ``.stalwartignore`` (pure)."""

from __future__ import annotations

import pytest

from stalwart.client.ignore import DEFAULT_IGNORE, IgnoreRules

CASES = [
    # (patterns, path, is_dir, ignored)
    (["*.pyc"], "a.pyc", False, True),
    (["*.pyc"], "deep/er/a.pyc", False, True),
    (["*.pyc"], "a.py", False, False),
    (["build/"], "build", True, True),
    (["build/"], "build", False, False),
    (["build/"], "src/build", True, True),
    (["/build"], "src/build", True, False),
    (["/build"], "build", False, True),
    (["docs/*.md"], "docs/a.md", False, True),
    (["docs/*.md"], "docs/x/a.md", False, False),
    (["docs/*.md"], "x/docs/a.md", False, False),
    (["**/logs"], "a/b/logs", True, True),
    (["**/logs"], "logs", True, True),
    (["data/**"], "data/x/y.bin", False, True),
    (["data/**"], "data", True, False),
    (["a/**/b"], "a/b", False, True),
    (["a/**/b"], "a/x/y/b", False, True),
    (["a/**/b"], "x/a/b", False, False),
    (["?.txt"], "a.txt", False, True),
    (["?.txt"], "ab.txt", False, False),
    (["[a-c].txt"], "b.txt", False, True),
    (["[a-c].txt"], "d.txt", False, False),
    (["[!a-c].txt"], "d.txt", False, True),
    (["[!a-c].txt"], "a.txt", False, False),
    (["*.log", "!keep.log"], "keep.log", False, False),
    (["*.log", "!keep.log"], "other.log", False, True),
    (["!keep.log", "*.log"], "keep.log", False, True),
    (["# comment", "", "x"], "# comment", False, False),
    (["\\#hash"], "#hash", False, True),
    (["\\!bang"], "!bang", False, True),
    (["trailing   "], "trailing", False, True),
    (["a[b"], "a[b", False, True),
    (["*"], "anything/at/all", False, True),
]


@pytest.mark.parametrize(("patterns", "path", "is_dir", "ignored"), CASES)
def test_patterns(patterns: list[str], path: str, is_dir: bool, ignored: bool) -> None:
    assert IgnoreRules(patterns).ignored(path, is_dir=is_dir) is ignored


@pytest.mark.parametrize(
    ("path", "is_dir", "ignored"),
    [
        ("__pycache__", True, True),
        ("pkg/__pycache__", True, True),
        ("m.pyo", False, True),
        ("terraform.tfstate", False, True),
        (".git", True, True),
        ("shared_fs", True, True),
        ("sub/shared_fs", True, False),
        ("train.py", False, False),
    ],
)
def test_determined_defaults(path: str, is_dir: bool, ignored: bool) -> None:
    assert IgnoreRules(DEFAULT_IGNORE).ignored(path, is_dir=is_dir) is ignored


def test_agrees_with_pathspec_on_files() -> None:
    """Cross-check with the reference implementation where it is installed."""
    pathspec = pytest.importorskip("pathspec")
    patterns = ["*.pyc", "/build", "docs/**/*.md", "!docs/keep.md", "data/", "[a-c]?.txt"]
    paths = [
        "a.pyc",
        "x/a.pyc",
        "build",
        "x/build",
        "docs/a.md",
        "docs/x/y.md",
        "docs/keep.md",
        "b1.txt",
        "z1.txt",
        "x/b1.txt",
        "readme.md",
    ]
    spec = pathspec.GitIgnoreSpec.from_lines(patterns)
    rules = IgnoreRules(patterns)
    for path in paths:
        assert rules.ignored(path, is_dir=False) is spec.match_file(path), path
