"""Metrics in bulk: many reports arrive whole and in order across batches, and an import
killed halfway that, run again, ends complete with nothing doubled (the million-report timing
is the ``importer`` benchmark: ``python -m bench run importer``). Both drive real processes
and databases: the seeded Determined database gets extra training reports by ``COPY``; the
kill test runs ``stalwart import determined`` as a subprocess and SIGKILLs it once it has
committed some metrics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from stalwart.master.db.engine import make_engine
from stalwart.master.db.tables import Checkpoint, Experiment, MetricReport, Trial
from stalwart.master.importer import import_determined
from stalwart.master.importer.metrics import BATCH
from tests.importer.conftest import Determined, new_determined
from tests.importer.seed import add_training_metrics

MANY = 5 * BATCH + 7
"""Reports added to one trial: several full batches and a partial one."""
KILL_TEST_REPORTS = 300_000


@pytest.fixture
def own_determined(tmp_path: Path) -> Iterator[Determined]:
    """A seeded Determined database of this test's own (it gets extra rows)."""
    yield from new_determined(tmp_path / "det-checkpoints")


def _source_reports(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM metrics").fetchone()
    assert row is not None
    return int(row[0])


def test_many_metric_reports_arrive_whole_across_batches(
    own_determined: Determined, pg_url: str
) -> None:
    first = next(iter(own_determined.seeded.trials))
    add_training_metrics(own_determined.url, first, MANY)
    engine = make_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        report = import_determined(own_determined.url, engine)
        assert report.imported("metrics") == _source_reports(own_determined.url)
        assert report.imported("metrics") > MANY
        with Session(engine) as session:
            total = session.scalar(select(func.count()).select_from(MetricReport))
            assert total == report.imported("metrics")
            last = session.scalars(
                select(MetricReport)
                .where(MetricReport.trial_id == first, MetricReport.trial_run_id == 7)
                .order_by(MetricReport.steps_completed.desc())
                .limit(1)
            ).one()
            assert last.steps_completed == MANY
            assert last.metrics == {"loss": 1.0 / MANY}
            assert last.batch_metrics == []
    finally:
        engine.dispose()


def _stalwart(*args: str) -> list[str]:
    return [sys.executable, "-m", "stalwart", *args]


def _kill_after_some_metrics(cmd: list[str]) -> str:
    """Run ``cmd``; SIGKILL it once it reports metrics committed but not all. Its stderr."""
    process = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(180, process.kill)  # a bound, should the line never come
    watchdog.start()
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if line.startswith("metrics: "):
                done, total = (int(n) for n in line.split()[1].split("/"))
                if 0 < done < total:
                    os.kill(process.pid, signal.SIGKILL)
                    break
        process.wait(timeout=30)
    finally:
        watchdog.cancel()
        if process.stderr is not None:
            process.stderr.close()
    assert process.returncode == -signal.SIGKILL, "".join(seen)
    return "".join(seen)


def _target_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'master.db'}"
    pg: str = request.getfixturevalue("pg_url")
    return pg


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_import_killed_halfway_completes_when_run_again(
    own_determined: Determined, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    seeded = own_determined.seeded
    add_training_metrics(own_determined.url, next(iter(seeded.trials)), KILL_TEST_REPORTS)
    db = _target_url(kind, tmp_path, request)
    cmd = _stalwart("import", "determined", "--from", own_determined.url, "--db", db)
    _kill_after_some_metrics(cmd)
    engine: Engine = make_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    expected = _source_reports(own_determined.url)
    try:
        with Session(engine) as session:
            partial = session.scalar(select(func.count()).select_from(MetricReport)) or 0
        assert 0 < partial < expected  # it was killed halfway through the metrics

        started = time.monotonic()
        done = subprocess.run(
            [*cmd, "--json"], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started < 300
        with Session(engine) as session:
            reports = session.scalar(select(func.count()).select_from(MetricReport))
            distinct = session.scalar(
                select(func.count()).select_from(
                    select(
                        MetricReport.trial_id,
                        MetricReport.group,
                        MetricReport.steps_completed,
                        MetricReport.trial_run_id,
                    )
                    .distinct()
                    .subquery()
                )
            )
            assert reports == expected  # complete
            assert distinct == reports  # nothing doubled
            assert session.scalar(select(func.count()).select_from(Experiment)) == 3
            assert session.scalar(select(func.count()).select_from(Trial)) == len(seeded.trials)
            checkpoints = sum(len(t.checkpoints) for t in seeded.trials.values())
            assert session.scalar(select(func.count()).select_from(Checkpoint)) == checkpoints
            mappings = session.execute(
                text("SELECT count(*) FROM import_mappings WHERE kind = 'experiment'")
            ).scalar()
            assert mappings == 3
    finally:
        engine.dispose()
