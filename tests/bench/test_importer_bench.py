"""The ``importer`` benchmark runs end to end at its quick size (so it cannot rot): a seeded
Determined database on the test PostgreSQL server imported into SQLite, every added report
counted. No timing is asserted here: the numbers are the benchmark's to report."""

from __future__ import annotations

import pytest
from bench.common import Options

from bench import importer


def test_the_quick_importer_benchmark_imports_every_report(pg_url: str) -> None:
    del pg_url  # the benchmark's own server (STALWART_BENCH_PG_URL): the same one here
    measurements = {m.name: m for m in importer.run(Options(quick=True, databases=("sqlite",)))}
    seconds = measurements["import_s_sqlite"]
    assert seconds.value is not None
    assert seconds.value > 0
    assert seconds.note.endswith(" reports")
    imported = int(seconds.note.split()[0].replace(",", ""))
    assert imported > importer.QUICK_REPORTS
    rate = measurements["reports_per_s_sqlite"].value
    assert rate == pytest.approx(imported / seconds.value)
