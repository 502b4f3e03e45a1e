"""``importer``: ``stalwart import determined`` moving a million metric reports.

Setup: a Determined 0.38.1 database of its own on the benchmark PostgreSQL server
(``STALWART_BENCH_PG_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``), built from
the captured schema and filled by the importer tests' seeder (``tests/importer/seed.py``: a
team's history), plus 1,000,000 training reports of one trial added with ``COPY``. Each target
database (``--db``; SQLite in a temporary directory, PostgreSQL in a private schema) gets a
whole import (:func:`stalwart.master.importer.import_determined`, as the CLI runs it), timed
from the call to its report.

- ``import_s_<db>``: seconds for the whole import. Target: under 60 s for 1,000,000 metric
  reports (issue 26).
- ``reports_per_s_<db>``: metric reports imported per second over the whole import.

``--quick`` adds 100,000 reports instead. The load average is printed before and after, as the
numbers move with what else the machine runs. The database is dropped at the end.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import BenchError, Measurement, Options, print_table, write_results
from bench.load import PG_URL, pg_schema
from stalwart.master.db.engine import make_engine
from stalwart.master.importer import import_determined

__all__ = ["NAME", "run"]

NAME = "importer"
REPORTS = 1_000_000
QUICK_REPORTS = 100_000
TARGET_S = 60.0


def _import_once(source_url: str, target_url: str) -> tuple[float, int]:
    """Seconds for one whole import into ``target_url``, and the metric reports imported."""
    engine = make_engine(target_url)
    try:
        started = time.perf_counter()
        report = import_determined(source_url, engine)
        return time.perf_counter() - started, report.imported("metrics")
    finally:
        engine.dispose()


def run(options: Options) -> list[Measurement]:
    """Seed, import into each database of ``options``, print and record the numbers."""
    try:
        import psycopg
        from tests.importer.seed import (
            add_training_metrics,
            create_determined_database,
            drop_database,
            seed,
        )
    except ImportError as exc:  # the seeder is test code: run from the repository root
        raise BenchError(f"cannot import the seeder ({exc}); run from the repository root") from exc
    try:
        with psycopg.connect(PG_URL, connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        raise BenchError(f"PostgreSQL at {PG_URL} is not reachable: {exc}") from exc
    count = QUICK_REPORTS if options.quick else REPORTS
    name = f"det_bench_{uuid.uuid4().hex[:12]}"
    load_before = list(os.getloadavg())
    measurements: list[Measurement] = []
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-importer-") as tmp:
        work = Path(tmp)
        source = create_determined_database(PG_URL, name)
        try:
            seeded = seed(source, work / "checkpoints")
            add_training_metrics(source, next(iter(seeded.trials)), count)
            for database in options.databases:
                if database == "sqlite":
                    seconds, reports = _import_once(source, f"sqlite:///{work / 'master.db'}")
                else:
                    with pg_schema() as url:
                        target = url.replace("postgresql://", "postgresql+psycopg://", 1)
                        seconds, reports = _import_once(source, target)
                results[database] = {"seconds": seconds, "reports": reports}
                scaled = seconds * REPORTS / max(reports, 1)
                measurements += [
                    Measurement(
                        f"import_s_{database}",
                        seconds,
                        "s",
                        target=f"< {TARGET_S:.0f} s per {REPORTS:,} reports",
                        passed=scaled < TARGET_S,
                        note=f"{reports:,} reports",
                    ),
                    Measurement(f"reports_per_s_{database}", reports / seconds, "reports/s"),
                ]
        finally:
            drop_database(PG_URL, name)
    load_after = list(os.getloadavg())
    print(f"load average before {load_before}, after {load_after}")
    print_table(NAME, measurements)
    write_results(
        NAME,
        options,
        measurements,
        {"reports_added": count, "results": results, "load_average": [load_before, load_after]},
    )
    return measurements
