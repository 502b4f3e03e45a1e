"""Historical usage with the official ``det`` CLI (0.38.1), against a real master and a real
agent whose container engine is the fake ``docker`` of the agent tests (it pulls an image in
about a second and runs the task as a host process).

After a command ran: ``det resources allocations START END`` prints the allocations CSV with the
command's row, its slot, times and image pull seconds; ``det resources raw`` (CSV and
``--json``) and ``det resources aggregated`` (daily, monthly, ``--json``) count it; a user who
is not an admin is refused.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, describe, det_at, local_agent
from tests.compat.test_det_workflows import UUID, admin

__all__ = ["admin"]  # logged in as admin, on this module's master and agent

pytestmark = pytest.mark.compat

FAKE_ENGINE = Path(__file__).parents[1] / "agent" / "fake_engine.py"
PULL_S = 1.0


@pytest.fixture(scope="module")
def agent(
    stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A one-slot agent whose ``docker`` is the fake engine (a pull takes ``PULL_S``)."""
    bin_dir = tmp_path_factory.mktemp("fake-bin")
    source = FAKE_ENGINE.read_text().split("\n", 1)[1]
    script = bin_dir / "docker"
    script.write_text(f"#!{sys.executable}\n{source}")
    script.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "STALWART_FAKE_ENGINE_DIR": str(tmp_path_factory.mktemp("engine")),
        "STALWART_FAKE_PULL_SECONDS": str(PULL_S),
    }
    yield from local_agent(
        stalwart_master, "usage", 1, env=env, extra=["--container-runtime", "docker"]
    )


def _stamp(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def ran(admin: Det) -> tuple[str, dt.datetime, dt.datetime]:
    """A command that ran to its end: its id, and a window around it."""
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    done = admin.ok("cmd", "run", "echo counted")
    assert "counted" in done.stdout, describe(done)
    found = UUID.search(done.stdout)
    assert found, describe(done)
    return found.group(0), start, dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)


def test_allocations_csv_has_the_task_and_its_pull_seconds(
    admin: Det, ran: tuple[str, dt.datetime, dt.datetime]
) -> None:
    task_id, start, end = ran
    out = admin.ok("resources", "allocations", _stamp(start), _stamp(end)).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    mine = [r for r in rows if r["task_id"] == task_id]
    assert len(mine) == 1, out
    row = mine[0]
    assert row["task_type"] == "COMMAND"
    assert row["username"] == "admin"
    assert row["workspace_name"] == "Uncategorized"
    assert row["slots"] == "1"
    assert row["agent_id"] == "usage"
    assert row["start_time"] < row["end_time"]
    assert float(row["seconds"]) > 0
    assert float(row["pull_seconds"]) >= PULL_S * 0.9, row
    # a window before the task ran has no row of it
    early = admin.ok(
        "resources", "allocations", _stamp(start - dt.timedelta(days=2)), _stamp(start)
    ).stdout
    assert task_id not in early


def test_raw_and_aggregated(admin: Det, ran: tuple[str, dt.datetime, dt.datetime]) -> None:
    _, start, end = ran
    raw_csv = admin.ok("resources", "raw", _stamp(start), _stamp(end)).stdout
    assert any(r["kind"] == "command" for r in csv.DictReader(io.StringIO(raw_csv))), raw_csv
    raw = json.loads(admin.ok("resources", "raw", _stamp(start), _stamp(end), "--json").stdout)
    entries = [e for e in raw["resourceEntries"] if e["kind"] == "command"]
    assert entries, raw
    assert entries[0]["username"] == "admin"
    assert entries[0]["slots"] == 1
    day = start.date().isoformat()
    last = end.date().isoformat()
    agg = json.loads(admin.ok("resources", "aggregated", day, last, "--json").stdout)
    assert agg["resourceEntries"][0]["periodStart"] == day
    assert agg["resourceEntries"][0]["period"] == "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY"
    total = sum(e["seconds"] for e in agg["resourceEntries"])
    assert total > 0
    assert sum(e["byUsername"].get("admin", 0) for e in agg["resourceEntries"]) == total
    monthly = json.loads(
        admin.ok("resources", "aggregated", day, last, "--monthly", "--json").stdout
    )
    assert all(
        e["period"] == "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY"
        for e in monthly["resourceEntries"]
    )
    assert sum(e["seconds"] for e in monthly["resourceEntries"]) == pytest.approx(total)
    table = admin.ok("resources", "aggregated", day, last).stdout
    assert table.startswith("period_start,aggregation_type,aggregation_key,seconds")
    assert f"{day},username,admin," in table


def test_only_admins_read_usage(
    admin: Det,
    det_venv: Path,
    stalwart_master: MasterProcess,
    tmp_path: Path,
    ran: tuple[str, dt.datetime, dt.datetime],
) -> None:
    _, start, end = ran
    admin.ok("user", "create", "carol", "--password", "Usage-test-pass-1")
    carol = det_at(det_venv, stalwart_master, tmp_path / "carol")
    carol.login("carol", "Usage-test-pass-1")
    done = carol.run("resources", "raw", _stamp(start), _stamp(end), "--json")
    assert "only an admin" in done.stdout + done.stderr, describe(done)
    done = carol.run("resources", "allocations", _stamp(start), _stamp(end))
    assert "only an admin" in done.stdout + done.stderr, describe(done)
