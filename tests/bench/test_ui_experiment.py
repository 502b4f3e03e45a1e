"""The ``ui_experiment`` benchmark at a tiny size, so it cannot rot: it seeds a finished search,
starts a real master on the SQLite database and opens the experiment page in chromium until every
trial's curve is drawn, cold and after a reload. No timing is asserted here.

Without chromium or Playwright the test is skipped (a failure under ``CI=true``), as the browser
tests of ``tests/ui`` are."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.__main__ import BENCHMARKS

from bench import ui_experiment
from tests.ui.conftest import CHROMIUM, in_ci

TINY = ui_experiment.Size(trials=4, points=300, validations=3, runs=1, idle_s=1.0)


def test_it_is_registered() -> None:
    assert ui_experiment.NAME in BENCHMARKS


def test_tiny_run_on_sqlite(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists() and not in_ci():
        pytest.skip(f"{CHROMIUM} is not installed (scripts/ui/browser.sh installs it)")
    found = {m.name: m for m in ui_experiment.measure_database("sqlite", tmp_path, TINY)}
    assert set(found) == {
        f"{name}[sqlite]"
        for name in (
            "curves_drawn_cold",
            "curves_drawn_warm",
            "series_server_cold",
            "series_server_warm",
            "idle_requests",
        )
    }
    assert found["curves_drawn_cold[sqlite]"].value is not None
    assert found["series_server_cold[sqlite]"].stats["count"] == 1  # one series request
    assert found["idle_requests[sqlite]"].value == 0  # an ended experiment is not polled
