"""bump / check over real files: a fake checkout in tmp_path, and this repository itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stalwart.environments import (
    TABLE_PATH,
    Manifest,
    bump,
    check,
    default_root,
    is_valid_tag,
    load_manifest,
    render_table,
    validate_tag,
)
from stalwart.environments.bump import MANIFEST_IN_REPO
from stalwart.environments.refs import find_references, reference_pattern, repository_files
from stalwart.errors import EnvsBumpError

REPO_ROOT = Path(__file__).parents[2]
PT = "determinedai/pytorch-ngc-dev"
TF = "determinedai/tensorflow-ngc-dev"
OLD = "8b3bea3"
NEW = "1a2b3c4"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _read(root: Path, rel: str) -> str:
    return (root / rel).read_text(encoding="utf-8")


def test_fake_repo_starts_stale(fake_repo: Path, manifest: Manifest) -> None:
    stale = {(s.path, s.line) for s in check(fake_repo)}
    assert stale == {
        ("docs/guide.md", 3),
        ("helm/values.yaml", 2),
        ("helm/values.yaml", 3),
        ("examples/tensorflow/const.yaml", 3),
        ("examples/tensorflow/const.yaml", 4),
    }


def test_bump_moves_every_reference_and_check_passes(fake_repo: Path, manifest: Manifest) -> None:
    before = _read(fake_repo, str(MANIFEST_IN_REPO))
    report = bump(fake_repo, NEW)

    assert (report.old_tag, report.new_tag) == (manifest.environments_tag, NEW)
    assert check(fake_repo) == []
    assert load_manifest(fake_repo / MANIFEST_IN_REPO).environments_tag == NEW
    assert f"`{PT}:{NEW}`" in _read(fake_repo, "docs/guide.md")
    assert f'cpuImage: "{PT}:{NEW}"' in _read(fake_repo, "helm/values.yaml")
    assert f'gpuImage: "{PT}:{NEW}"' in _read(fake_repo, "helm/values.yaml")
    assert _read(fake_repo, "examples/tensorflow/const.yaml").count(f"{TF}:{NEW}") == 2
    # Regenerated, not string-replaced; and equal to what the new manifest renders.
    new_manifest = load_manifest(fake_repo / MANIFEST_IN_REPO)
    assert _read(fake_repo, TABLE_PATH.as_posix()) == render_table(new_manifest)

    changed = {f.path: f for f in report.files}
    assert set(changed) == {
        MANIFEST_IN_REPO.as_posix(),
        "docs/guide.md",
        "helm/values.yaml",
        "examples/tensorflow/const.yaml",
        TABLE_PATH.as_posix(),
    }
    assert changed[TABLE_PATH.as_posix()].regenerated
    assert [c.line for c in changed["helm/values.yaml"].lines] == [2, 3]
    assert report.count == 1 + 2 + 2 + 2 + 1

    # The manifest keeps its comments and layout: only the tag line differs.
    after = _read(fake_repo, str(MANIFEST_IN_REPO))
    diff = [(a, b) for a, b in zip(before.split("\n"), after.split("\n"), strict=True) if a != b]
    assert diff == [(f"environments_tag: {manifest.environments_tag}", f"environments_tag: {NEW}")]


def test_bump_leaves_pinned_and_ignored_lines_alone(fake_repo: Path, manifest: Manifest) -> None:
    guide_before = _read(fake_repo, "docs/guide.md").split("\n")
    bump(fake_repo, NEW)
    guide = _read(fake_repo, "docs/guide.md").split("\n")
    assert guide[3] == guide_before[3]  # the historical line with the ignore marker
    rocm = manifest.default_image("pytorch", "rocm")[1]
    assert guide[4] == f"ROCm: {rocm}"
    assert f'rocmImage: "{rocm}"' in _read(fake_repo, "helm/values.yaml")


def test_bump_is_idempotent(fake_repo: Path) -> None:
    bump(fake_repo, NEW)
    again = bump(fake_repo, NEW)
    assert again.files == []
    assert again.count == 0


def test_bump_to_the_current_tag_fixes_strays(fake_repo: Path, manifest: Manifest) -> None:
    report = bump(fake_repo, manifest.environments_tag)
    assert MANIFEST_IN_REPO.as_posix() not in {f.path for f in report.files}
    assert check(fake_repo) == []


def test_planted_stale_tag_is_reported_with_file_and_line(fake_repo: Path) -> None:
    bump(fake_repo, NEW)
    planted = fake_repo / "deploy/cluster.yaml"
    planted.parent.mkdir()
    planted.write_text(f"a: 1\nimage: docker.io/{PT}:{OLD}.\n", encoding="utf-8")
    (stale,) = check(fake_repo)
    assert (stale.path, stale.line) == ("deploy/cluster.yaml", 2)
    assert str(stale) == f"deploy/cluster.yaml:2: {PT}:{OLD} (manifest says {PT}:{NEW})"


def test_out_of_date_or_missing_table_is_reported(fake_repo: Path) -> None:
    bump(fake_repo, NEW)
    table = fake_repo / TABLE_PATH
    lines = table.read_text(encoding="utf-8").split("\n")
    lines[4] = "hand edit"
    table.write_text("\n".join(lines), encoding="utf-8")
    (stale,) = check(fake_repo)
    assert (stale.path, stale.line) == (TABLE_PATH.as_posix(), 5)
    assert "stalwart envs table --write" in str(stale)
    table.unlink()
    (missing,) = check(fake_repo)
    assert "missing" in missing.found


def test_check_outside_a_checkout_uses_the_packaged_manifest(
    tmp_path: Path, manifest: Manifest
) -> None:
    (tmp_path / "exp.yaml").write_text(f"image: {PT}:{OLD}\n", encoding="utf-8")
    (stale,) = check(tmp_path)
    assert stale.expected == f"{PT}:{manifest.environments_tag}"


def test_bump_needs_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(EnvsBumpError, match=r"has no src/stalwart/environments/manifest\.yaml"):
        bump(tmp_path, NEW)


@pytest.mark.parametrize("tag", ["", "-abc", ".abc", "a b", "a/b", "x" * 129, "abc.", "abc-", "ä"])
def test_invalid_tags_are_rejected_and_nothing_is_written(fake_repo: Path, tag: str) -> None:
    before = _read(fake_repo, "helm/values.yaml")
    with pytest.raises(EnvsBumpError, match="not a valid image tag"):
        bump(fake_repo, tag)
    assert _read(fake_repo, "helm/values.yaml") == before


@given(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,126}[A-Za-z0-9_]", fullmatch=True))
def test_docker_tags_are_valid(tag: str) -> None:
    assert is_valid_tag(tag)
    assert validate_tag(tag) == tag


@given(st.text(max_size=140))
def test_tag_validation_matches_the_grammar(tag: str) -> None:
    import re

    grammar = re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag) is not None
    assert is_valid_tag(tag) == (grammar and not tag.endswith((".", "-")))


def test_reference_pattern_boundaries() -> None:
    pattern = reference_pattern([PT, TF])
    text = "\n".join(
        [
            f"x{PT}:abc",  # part of a longer name
            f"{PT}-extra:abc",  # another repository
            f"docker.io/{PT}:abc.",  # registry prefix; the full stop is prose
            f"{TF}:${{TAG}}",  # a template, not a tag
            f"{TF}:def  # envs-check: ignore",
        ]
    )
    found = [(r.line, r.image) for r in find_references(text, pattern)]
    assert found == [(3, f"{PT}:abc")]


def test_crlf_and_binary_files(fake_repo: Path) -> None:
    (fake_repo / "win.txt").write_bytes(f"a\r\nimage: {PT}:{OLD}\r\n".encode())
    (fake_repo / "blob.bin").write_bytes(b"\0\1" + f"{PT}:{OLD}".encode())
    bump(fake_repo, NEW)
    assert (fake_repo / "win.txt").read_bytes() == f"a\r\nimage: {PT}:{NEW}\r\n".encode()
    assert (fake_repo / "blob.bin").read_bytes().endswith(f"{PT}:{OLD}".encode())


def test_walk_skips_hidden_venv_and_build_dirs(tmp_path: Path) -> None:
    for rel in [".git/x", ".venv/x", "node_modules/x", "env/pyvenv.cfg", "build/x", "a/b.txt"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x", encoding="utf-8")
    assert repository_files(tmp_path) == ["a/b.txt"]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@needs_git
def test_git_checkout_respects_gitignore(fake_repo: Path) -> None:
    _git(fake_repo, "init", "-q")
    (fake_repo / ".gitignore").write_text("ignored/\n", encoding="utf-8")
    (fake_repo / "ignored").mkdir()
    (fake_repo / "ignored/stale.md").write_text(f"{PT}:{OLD}\n", encoding="utf-8")
    _git(fake_repo, "add", "docs")
    files = repository_files(fake_repo)
    assert "docs/guide.md" in files  # tracked
    assert "helm/values.yaml" in files  # untracked, not ignored
    assert "ignored/stale.md" not in files
    bump(fake_repo, NEW)
    assert check(fake_repo) == []
    assert _read(fake_repo, "ignored/stale.md") == f"{PT}:{OLD}\n"


@needs_git
def test_default_root(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert default_root(plain) == plain
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    _git(repo, "init", "-q")
    assert default_root(repo / "sub").resolve() == repo.resolve()


def test_this_repository_passes_envs_check() -> None:
    assert [str(s) for s in check(REPO_ROOT)] == []


def test_generated_table_in_this_repository_is_current() -> None:
    table = REPO_ROOT / TABLE_PATH
    assert table.read_text(encoding="utf-8") == render_table(load_manifest())
