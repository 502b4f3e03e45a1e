"""Packing a context directory into a model definition (pure, on temporary directories)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from stalwart.client import context
from stalwart.client.context import pack_context, wire_files
from stalwart.errors import InvalidArgumentError, PayloadTooLargeError
from tests.client.support import make_model_dir


def _paths(root: Path, includes: tuple[Path, ...] = ()) -> list[str]:
    return [entry.path for entry in pack_context(root, includes)]


def test_ignore_files_and_defaults_leave_files_out(tmp_path: Path) -> None:
    root = make_model_dir(tmp_path / "ctx")
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")
    (root / "pkg" / "m.py").write_text("print(1)\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")
    # top-down: a directory's entries, then those of its subdirectories
    assert _paths(root) == ["pkg", "const.yaml", "train.py", "pkg/m.py"]


def test_wire_entries_carry_content_mode_and_mtime(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    script = tmp_path / "d" / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    os.utime(script, (1_700_000_000, 1_700_000_000))
    directory, file = wire_files(pack_context(tmp_path))
    assert directory == {
        "path": "d",
        "type": 53,
        "content": "",
        "mode": (tmp_path / "d").stat().st_mode,
        "mtime": str(int((tmp_path / "d").stat().st_mtime)),
        "uid": 0,
        "gid": 0,
    }
    assert file["path"] == "d/run.sh"
    assert file["type"] == 48
    assert base64.b64decode(str(file["content"])) == b"echo hi\n"
    assert file["mode"] == 0o100755
    assert file["mtime"] == "1700000000"


def test_includes_go_under_their_own_name(tmp_path: Path) -> None:
    root = tmp_path / "ctx"
    root.mkdir()
    (root / "train.py").write_text("")
    lib = tmp_path / "lib"
    (lib / "sub").mkdir(parents=True)
    (lib / "sub" / "util.py").write_text("")
    (lib / "skip.tmp").write_text("")
    (lib / ".stalwartignore").write_text("*.tmp\n")
    extra = tmp_path / "extra.txt"
    extra.write_text("x")
    assert _paths(root, (lib, extra)) == [
        "train.py",
        "lib",
        "lib/sub",
        "lib/sub/util.py",
        "extra.txt",
    ]
    assert _paths(None, (extra,)) == ["extra.txt"]  # type: ignore[arg-type]


def test_duplicate_top_level_names_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "ctx"
    root.mkdir()
    (root / "extra.txt").write_text("")
    (tmp_path / "extra.txt").write_text("")
    with pytest.raises(InvalidArgumentError, match=r"named 'extra\.txt'"):
        pack_context(root, [tmp_path / "extra.txt"])


def test_missing_directory_and_include(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        pack_context(tmp_path / "nope")
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        pack_context(tmp_path, [tmp_path / "nope"])


def test_size_limit_names_the_largest_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "MAX_CONTEXT_BYTES", 100)
    (tmp_path / "big.bin").write_bytes(b"x" * 200)
    with pytest.raises(PayloadTooLargeError, match=r"largest: big\.bin") as info:
        pack_context(tmp_path)
    assert info.value.hint is not None
    assert ".stalwartignore" in info.value.hint


def test_dangling_links_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("")
    (tmp_path / "gone").symlink_to(tmp_path / "missing")
    assert _paths(tmp_path) == ["ok.py"]
