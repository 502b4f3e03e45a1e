"""The ``experiment_list`` benchmark at a small size, so it cannot rot: it seeds, starts a real
master on the seeded SQLite database (and PostgreSQL where the tests have it) and gets a
non-empty page for every measured request. No timing is asserted here."""

from __future__ import annotations

from pathlib import Path

from bench.__main__ import BENCHMARKS
from bench.common import Measurement

from bench import experiment_list

SMALL = experiment_list.Size(experiments=300, requests=2, warmup=1)
MEASURED = {"sort_searcher_metric", "sort_hyperparameter", "sort_validation_metric"}


def test_it_is_registered() -> None:
    assert experiment_list.NAME in BENCHMARKS


def _check(found: list[Measurement], database: str) -> None:
    assert {m.name for m in found} == {f"{n}[{database}]" for n in [*MEASURED, "filter_and_sort"]}
    for measurement in found:
        assert measurement.stats["count"] == SMALL.requests
        assert measurement.value is not None


def test_small_run_on_sqlite(tmp_path: Path) -> None:
    _check(experiment_list.measure_database("sqlite", tmp_path, SMALL), "sqlite")


def test_small_run_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    del pg_url  # skips (or fails under CI) like every PostgreSQL test when it is unreachable
    _check(experiment_list.measure_database("postgresql", tmp_path, SMALL), "postgresql")
