"""``cluster``: launching trials on a real master and local agent (``stalwart.local``).

Setup: ``stalwart master`` and ``stalwart agent --slots 16`` as processes on a fresh home
(SQLite), exactly what ``stalwart up`` runs. Then:

- ``launch_latency``: 20 trials one after another (``max_concurrent_trials: 1``), each a Python
  script whose first line records the time. Latency = first line of user code minus the moment
  the master created the trial's allocation (``allocations.start_time``). Target p50 < 0.5 s.
- ``sleep_1000``: 1,000 trials that each ``sleep 1`` on 16 slots (a random search with
  ``max_concurrent_trials: 16``); wall time from creating the experiment to its completion,
  against the 62.5 s floor (1,000 x 1 s / 16). Target at most 5% over the floor. Also the p50
  and p99 of the gap between a slot's trial ending and the next trial starting on the agent.
  ``--quick`` runs 160 trials (floor 10 s).
"""

from __future__ import annotations

import base64
import datetime as dt
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import (
    BenchError,
    Measurement,
    Options,
    _free_port,
    latency_stats,
    print_table,
    write_results,
)
from stalwart.local import LocalCluster

__all__ = ["NAME", "run"]

NAME = "cluster"

FIRST_LINE = """\
import os, time
stamp = time.time()
open(os.path.join(os.environ["STAMPS"], os.environ["DET_TRIAL_ID"]), "w").write(repr(stamp))
"""


def _login(url: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=60.0)
    token = client.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
    token.raise_for_status()
    client.headers["Authorization"] = f"Bearer {token.json()['token']}"
    return client


def _create(client: httpx.Client, config: str, files: dict[str, str]) -> int:
    body = {
        "config": config,
        "activate": True,
        "modelDefinition": [
            {"path": p, "type": 48, "content": base64.b64encode(t.encode()).decode()}
            for p, t in files.items()
        ],
    }
    response = client.post("/api/v1/experiments", json=body)
    response.raise_for_status()
    return int(response.json()["experiment"]["id"])


def _wait(
    client: httpx.Client, exp_id: int, timeout: float, floor: float = 0.0, *, every: float = 0.1
) -> str:
    """The experiment's final state, polled ``every`` seconds; during the first ``floor``
    seconds (less one), when it cannot have finished, only every second: the master measured
    should serve the experiment, not the benchmark's polling."""
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        state = str(client.get(f"/api/v1/experiments/{exp_id}").json()["experiment"]["state"])
        if state in ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"):
            return state
        early = time.monotonic() - started < floor - 1.0
        time.sleep(max(every, 1.0) if early else every)
    raise BenchError(f"experiment {exp_id} did not finish within {timeout:g}s")


def _ended_at(db: Path, exp_id: int) -> float:
    """When the master recorded the experiment's end (its ``end_time``), in epoch seconds: a
    search's wall time ends there, however often the benchmark polls."""
    with sqlite3.connect(db) as conn:
        row = conn.execute("select end_time from experiments where id = ?", (exp_id,)).fetchone()
    ended = _epoch(row[0] if row else None)
    if ended is None:
        raise BenchError(f"experiment {exp_id} has no end time")
    return ended


def _epoch(text: str | None) -> float | None:
    """Epoch seconds of a stored time (naive means UTC); None stays None."""
    if text is None:
        return None
    value = dt.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def _times(db: Path, exp_id: int) -> list[tuple[int, float, float | None]]:
    """``(trial_id, allocation start, allocation end)`` of every allocation, in epoch seconds."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select t.id, a.start_time, a.end_time from allocations a "
            "join trials t on t.task_id = a.task_id where t.experiment_id = ? order by a.id",
            (exp_id,),
        ).fetchall()
    return [(int(t), _epoch(s) or 0.0, _epoch(e)) for t, s, e in rows]


def _config(name: str, entrypoint: str, trials: int, concurrent: int) -> str:
    return (
        f"name: {name}\nentrypoint: {entrypoint}\nmax_restarts: 0\n"
        "resources:\n  slots_per_trial: 1\n"
        "hyperparameters:\n  x:\n    type: double\n    minval: 0\n    maxval: 1\n"
        f"searcher:\n  name: random\n  metric: loss\n  max_trials: {trials}\n"
        f"  max_concurrent_trials: {concurrent}\n"
    )


def _launch_latency(cluster: LocalCluster, client: httpx.Client, work: Path) -> Measurement:
    stamps = work / "stamps"
    stamps.mkdir()
    config = _config("launch-latency", "python3 first_line.py", 20, 1)
    config += f"environment:\n  environment_variables: [STAMPS={stamps}]\n"
    exp_id = _create(client, config, {"first_line.py": FIRST_LINE})
    _wait(client, exp_id, 300)
    samples = []
    for trial_id, start, _ in _times(cluster.home / "master.db", exp_id):
        stamp = stamps / str(trial_id)
        if stamp.exists():
            samples.append(float(stamp.read_text()) - start)
    if not samples:
        raise BenchError("no trial recorded its first line")
    stats = latency_stats(samples)
    p50 = stats["p50_ms"] / 1000
    return Measurement(
        name="launch_latency_p50",
        value=p50,
        unit="s",
        target="< 0.5 s",
        passed=p50 < 0.5,
        stats=stats,
        note=f"{len(samples)} trials, allocation created -> first line of user code",
    )


def _sleep_trials(
    cluster: LocalCluster, client: httpx.Client, trials: int, slots: int
) -> list[Measurement]:
    floor = trials * 1.0 / slots
    started = time.time()
    exp_id = _create(client, _config("sleep-1s", "sleep 1", trials, slots), {})
    state = _wait(client, exp_id, floor * 10 + 120, floor, every=1.0)
    wall = _ended_at(cluster.home / "master.db", exp_id) - started
    if state != "STATE_COMPLETED":
        raise BenchError(f"the experiment ended {state}")
    times = _times(cluster.home / "master.db", exp_id)
    ends = sorted(e for _, _, e in times if e is not None)
    starts = sorted(s for _, s, _ in times)
    gaps = []
    for end in ends[: len(ends) - slots]:
        later = [s for s in starts if s >= end]
        if later:
            gaps.append(later[0] - end)
    overhead = (wall - floor) / floor * 100
    return [
        Measurement(
            name=f"sleep_{trials}_wall",
            value=wall,
            unit="s",
            stats={"floor_s": floor, "overhead_pct": overhead},
            note=f"{trials} trials x 1 s on {slots} slots",
        ),
        Measurement(
            name=f"sleep_{trials}_overhead",
            value=overhead,
            unit="%",
            target="<= 5 %",
            passed=overhead <= 5.0,
        ),
        Measurement(
            name="trial_gap",
            value=latency_stats(gaps)["p50_ms"] / 1000 if gaps else None,
            unit="s",
            stats=latency_stats(gaps) if gaps else {},
            note="a trial's end to the next trial's allocation (p50; p99 in stats)",
        ),
    ]


def run(options: Options) -> list[Measurement]:
    """Run the cluster benchmarks (see the module docstring)."""
    work = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "master.yaml"
    config.write_text("cluster:\n  tick: 1.0\n")
    cluster = LocalCluster(home=work / "home", port=_free_port(), master_config=config)
    slots = 16
    try:
        cluster.start_master()
        cluster.start_agent("bench", slots=slots)
        client = _login(cluster.url)
        results = [_launch_latency(cluster, client, work)]
        results += _sleep_trials(cluster, client, 160 if options.quick else 1000, slots)
        client.close()
    finally:
        cluster.stop()
        if options.workdir is None and not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    print_table(NAME, results)
    path = write_results(NAME, options, results, {"setup": {"slots": slots, "database": "sqlite"}})
    print(f"raw results: {path}")
    return results
