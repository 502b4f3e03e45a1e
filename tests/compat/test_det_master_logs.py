"""``det master logs [--tail N] [-f]`` (determined 0.38.1) against ``stalwart master``: the
official client streams ``GET /api/v1/master/logs`` (``offset=-N`` for ``--tail``) and prints
``<timestamp> [<level>]: <message>`` for each ``v1MasterLogsResponse``."""

from __future__ import annotations

import subprocess
import threading

import pytest

from tests.compat.conftest import DET_TIMEOUT_S, Det, describe

pytestmark = pytest.mark.compat

STARTED = "stalwart.master: Stalwart "


def test_det_master_logs_and_tail(det: Det) -> None:
    det.login()
    done = det.ok("master", "logs")
    lines = done.stdout.splitlines()
    assert STARTED in lines[0], describe(done)
    assert "serving cluster" in lines[0], describe(done)
    assert "Traceback" not in done.stderr, describe(done)

    tail = det.ok("master", "logs", "--tail", "1")
    assert len(tail.stdout.splitlines()) == 1, describe(tail)
    assert "]: " in tail.stdout, describe(tail)


def test_det_master_logs_follow(det: Det) -> None:
    det.login()
    process = subprocess.Popen(
        [str(det.executable), "-m", det.master.url, "master", "logs", "-f", "--tail", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(det.env),
        start_new_session=True,
    )
    try:
        got: list[str] = []
        reader = threading.Thread(
            target=lambda: got.append(process.stdout.readline() if process.stdout else ""),
            daemon=True,
        )
        reader.start()
        reader.join(DET_TIMEOUT_S)
        assert got, "no line within the wait"
        assert "]: " in got[0], got
        assert process.poll() is None  # still following: the stream stays open
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=DET_TIMEOUT_S)
    assert "Traceback" not in err, err
