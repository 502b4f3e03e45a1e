"""wrap_rank: every output line gets its ``[rank=N] `` prefix; exit codes and signals pass."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stalwart.launch.wrap_rank import LinePrefixer, main, rank_from, run
from tests.launch.conftest import REPO


def _prefixed(*chunks: bytes, max_line: int = 64) -> bytes:
    out = io.BytesIO()
    prefixer = LinePrefixer(b"[rank=3] ", out, max_line=max_line)
    for chunk in chunks:
        prefixer.feed(chunk)
    prefixer.finish()
    return out.getvalue()


def test_lines_get_the_prefix_whatever_their_end() -> None:
    assert _prefixed(b"a\nb\r\nc") == b"[rank=3] a\n[rank=3] b\r\n[rank=3] c\n"
    assert _prefixed(b"10%\r20%\r", b"done\n") == b"[rank=3] 10%\r[rank=3] 20%\r[rank=3] done\n"
    assert _prefixed(b"x\r", b"\ny\n") == b"[rank=3] x\r\n[rank=3] y\n"  # \r\n split in two
    assert _prefixed(b"par", b"tial", b" line\n") == b"[rank=3] partial line\n"
    assert _prefixed(b"z" * 10, max_line=4) == b"".join(
        [b"[rank=3] zzzz\n", b"[rank=3] zzzz\n", b"[rank=3] zz\n"]
    )
    assert _prefixed(b"\xff\xfe bytes\n") == b"[rank=3] \xff\xfe bytes\n"
    assert _prefixed() == b""


def test_run_prefixes_both_streams_and_returns_the_exit_code(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    script = "import sys; print('hello'); print('oops', file=sys.stderr); sys.exit(7)"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        code = run([sys.executable, "-c", script], 1, stdout=stdout, stderr=stderr)
    assert code == 7
    assert out.read_bytes() == b"[rank=1] hello\n"
    assert err.read_bytes() == b"[rank=1] oops\n"


def test_no_rank_passes_lines_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with out.open("wb") as stdout, (tmp_path / "err").open("wb") as stderr:
        assert (
            run([sys.executable, "-c", "print('plain')"], None, stdout=stdout, stderr=stderr) == 0
        )
    assert out.read_bytes() == b"plain\n"


def test_a_missing_command_is_127_and_an_empty_one_is_a_usage_error() -> None:
    assert run(["/nonexistent/program"], 0) == 127
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2


def test_sigterm_reaches_the_command_once_and_the_status_says_so(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    child = (
        "import pathlib, signal, sys, time\n"
        "hits = []\n"
        "signal.signal(signal.SIGTERM, lambda *a: hits.append(1))\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "deadline = time.monotonic() + 20\n"
        "while not hits and time.monotonic() < deadline: time.sleep(0.05)\n"
        "time.sleep(0.3)\n"
        "print('terms', len(hits), flush=True)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "signal.raise_signal(signal.SIGTERM)\n"
    )
    env = {**os.environ, "RANK": "4", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stalwart.launch.wrap_rank", "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)  # as torch stops a worker: its whole group
    out, _ = proc.communicate(timeout=20)
    assert out == b"[rank=4] terms 1\n"
    assert proc.returncode == 128 + signal.SIGTERM


def test_strip_removes_a_tag_at_the_start_of_lines_only() -> None:
    out = io.BytesIO()
    prefixer = LinePrefixer(b"> ", out, max_line=8, strip=re.compile(rb"^T:"))
    for chunk in (b"T:a\nT:b T:c\r", b"\nxT:d\n", b"T:" + b"e" * 12, b"T:\n"):
        prefixer.feed(chunk)
    prefixer.finish()
    # a cut line: the tag goes from its first piece only
    assert out.getvalue() == b"> a\n> b T:c\r\n> xT:d\n> eeeeee\n> eeeeeeT:\n"


def test_the_rank_comes_from_the_first_variable_set() -> None:
    assert rank_from(["HOROVOD_RANK", "RANK"], {"RANK": "2", "HOROVOD_RANK": "5"}) == 5
    assert rank_from(["HOROVOD_RANK", "RANK"], {"HOROVOD_RANK": "x", "RANK": "2"}) == 2
    assert rank_from(["RANK"], {}) is None
