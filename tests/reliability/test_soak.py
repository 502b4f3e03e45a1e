"""The chaos soak's short version (``bench/soak.py``, ``QUICK``) on SQLite and on PostgreSQL.

An adaptive_asha search runs while the master and the agents are SIGKILLed and restarted over
and over (and, on PostgreSQL, the master's database backends are terminated); at the end the
experiment is COMPLETED, no acknowledged metric report or checkpoint is lost or stored twice,
no trial ran a step again past its last checkpoint, and no id was handed out twice. The full
20-minute soak is ``python -m bench run soak`` (docs/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

from bench.soak import QUICK, run_soak


def test_the_quick_soak_on_sqlite_keeps_every_promise(tmp_path: Path) -> None:
    result = run_soak(QUICK, tmp_path)
    assert result.problems == []
    assert result.kills["master"] >= 1
    assert result.kills["agent"] >= 1
    assert result.reports_flushed > 0


def test_the_quick_soak_on_postgresql_keeps_every_promise(tmp_path: Path, pg_url: str) -> None:
    result = run_soak(QUICK, tmp_path, pg_url)
    assert result.problems == []
    assert result.kills["master"] >= 1
    assert result.kills["agent"] >= 1
    assert result.kills["pg-backends"] >= 1
    assert result.reports_flushed > 0
