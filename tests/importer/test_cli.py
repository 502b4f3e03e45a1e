"""``stalwart import determined`` as a user runs it: the report, ``--dry-run --json``, and one
clear line for a wrong URL, a database that is not Determined's and an unknown workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import PG_URL
from tests.importer.conftest import Determined

TIMEOUT_S = 120


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stalwart", "import", "determined", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_the_report_and_a_dry_run_as_json(determined: Determined, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'master.db'}"
    dry = _run("--from", determined.url, "--db", db, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dryRun"] is True
    assert report["counts"]["experiment"] == {"imported": 3}
    assert report["source"] == "5c1c9d5e-3b8e-4a57-9d5f-1f2d3c4b5a69"
    done = _run("--from", determined.url, "--db", db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Imported from Determined cluster 5c1c9d5e-")
    assert "experiment             3         0         0" in done.stdout
    assert "metrics: " in done.stderr  # progress, one line per batch off a terminal


def test_clear_refusals(determined: Determined, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'master.db'}"
    wrong = _run("--from", "mysql://det@db/det", "--db", db)
    assert wrong.returncode == 1
    assert "--from must be a PostgreSQL URL" in wrong.stderr
    not_determined = _run("--from", PG_URL, "--db", db)
    assert not_determined.returncode == 1
    assert "this is not a Determined database" in not_determined.stderr
    unknown = _run("--from", determined.url, "--db", db, "--workspace", "nlp")
    assert unknown.returncode == 1
    assert "no workspace named 'nlp' (it has: Uncategorized, vision)" in unknown.stderr
