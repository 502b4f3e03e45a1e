"""``b5``: launch latency, against Ray Tune (issue 10, B5).

Stalwart: ``stalwart master`` and ``stalwart agent --slots 4`` as processes on a fresh home
(SQLite), exactly what ``stalwart up`` runs (the ``cluster`` benchmark's setup).

- ``launch_latency_p50`` (allocation -> first line): 20 trials one after another, each a
  Python script whose first line stamps the time: the stamp minus the master creating the
  trial's allocation (``cluster``'s ``launch_latency``, reused). Target p50 < 0.5 s.
- ``create_to_first_metric``: N experiments one after another (10; 3 with ``--quick``), each a
  ``single`` search of a Core API script that stamps its first line, ``import stalwart as det``,
  ``det.core.init()`` and one ``report_training_metrics``: from just before
  ``POST /api/v1/experiments`` to that first metric's ``metric_reports.report_time`` (the time
  the harness stamped on the report). Broken down into create -> allocation -> first line ->
  import -> ``core.init()`` -> report. Target p50 < 2 s. Also ``create -> first user line``.

Ray Tune (``bench/peers/launch_latency.py`` in the peers' venv): ``Tuner.fit()`` of one trial
to the trainable's first line, and to the driver receiving its first ``tune.report``, N times
one after another after one ``ray.init`` (not counted, as starting the master and agent is not).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.b1 import ensure_peers_venv
from bench.cluster import _create, _epoch, _launch_latency, _login, _wait
from bench.common import (
    BenchError,
    Measurement,
    Options,
    _free_port,
    latency_stats,
    write_results,
)
from bench.sidebyside import format_table, ratio_text
from stalwart.local import LocalCluster

__all__ = ["NAME", "run"]

NAME = "b5"
RUNS = 10
QUICK_RUNS = 3
FIRST_LINE_TARGET_S = 0.5
FIRST_METRIC_TARGET_S = 2.0
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "launch_latency.py"

FIRST_METRIC = """\
import os, time
stamps = {"first_line": time.time()}
import stalwart as det
stamps["imported"] = time.time()
with det.core.init() as core_context:
    stamps["initialized"] = time.time()
    core_context.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
    stamps["reported"] = time.time()
stamps["closed"] = time.time()
open(os.path.join(os.environ["STAMPS"], "stamps"), "w").write(repr(stamps))
"""


def _first_times(db: Path, exp_id: int) -> tuple[float | None, float | None]:
    """The experiment's first allocation start and first stored metric, in epoch seconds."""
    with sqlite3.connect(db) as conn:
        alloc = conn.execute(
            "select min(a.start_time) from allocations a join trials t on t.task_id = a.task_id"
            " where t.experiment_id = ?",
            (exp_id,),
        ).fetchone()[0]
        metric = conn.execute(
            "select min(m.report_time) from metric_reports m join trials t on t.id = m.trial_id"
            " where t.experiment_id = ?",
            (exp_id,),
        ).fetchone()[0]
    return _epoch(alloc), _epoch(metric)


def _create_to_first_metric(
    cluster: LocalCluster, client: httpx.Client, work: Path, runs: int
) -> dict[str, list[float]]:
    stamps = work / "metric-stamps"
    stamps.mkdir()
    config = (
        "name: first-metric\nentrypoint: python3 first_metric.py\nmax_restarts: 0\n"
        "resources:\n  slots_per_trial: 1\nhyperparameters: {}\n"
        "searcher:\n  name: single\n  metric: loss\n  max_length: {batches: 1}\n"
        f"environment:\n  environment_variables: [STAMPS={stamps}]\n"
    )
    out: dict[str, list[float]] = {
        "total": [],
        "to_first_line": [],
        "to_allocation": [],
        "to_line": [],
        "import": [],
        "core_init": [],
        "to_metric": [],
    }
    for _ in range(runs):
        (stamps / "stamps").unlink(missing_ok=True)
        t0 = time.time()
        exp_id = _create(client, config, {"first_metric.py": FIRST_METRIC})
        state = _wait(client, exp_id, 300)
        alloc, metric = _first_times(cluster.home / "master.db", exp_id)
        if state != "STATE_COMPLETED" or alloc is None or metric is None:
            raise BenchError(f"experiment {exp_id} ended {state} without a stored metric")
        marks = ast.literal_eval((stamps / "stamps").read_text())
        line = float(marks["first_line"])
        out["total"].append(metric - t0)
        out["to_first_line"].append(line - t0)
        out["to_allocation"].append(alloc - t0)
        out["to_line"].append(line - alloc)
        out["import"].append(marks["imported"] - line)
        out["core_init"].append(marks["initialized"] - marks["imported"])
        out["to_metric"].append(metric - marks["initialized"])
    return out


def _ray(runs: int, work: Path) -> dict[str, Any]:
    python, _ = ensure_peers_venv()
    out = work / "ray.json"
    log_path = work / "ray.log"
    cmd = [str(python), str(PEER_SCRIPT), "--runs", str(runs), "--out", str(out)]
    with log_path.open("wb") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=1800, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise BenchError(f"the Ray Tune side exited with {done.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _p50(samples: list[float]) -> float:
    return float(latency_stats(samples)["p50_ms"]) / 1000


def run(options: Options) -> list[Measurement]:
    """Measure Stalwart, then Ray Tune; print the side-by-side table and write JSON."""
    runs = QUICK_RUNS if options.quick else RUNS
    work = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-b5-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "master.yaml"
    config.write_text("cluster:\n  tick: 1.0\n")
    load_before = list(os.getloadavg())
    cluster = LocalCluster(home=work / "home", port=_free_port(), master_config=config)
    try:
        print(f"{NAME}: stalwart ...", flush=True)
        cluster.start_master()
        cluster.start_agent("bench", slots=4)
        client = _login(cluster.url)
        launch = _launch_latency(cluster, client, work)
        first = _create_to_first_metric(cluster, client, work, runs)
        client.close()
    finally:
        cluster.stop()
    try:
        print(f"{NAME}: ray_tune ...", flush=True)
        ray = _ray(runs, work)
    finally:
        if options.workdir is None and not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    ours_line = launch.value or 0.0
    ours_metric = _p50(first["total"])
    ray_line = _p50(ray["first_line_s"])
    ray_metric = _p50(ray["first_result_s"]) if ray["first_result_s"] else None
    ours_first_line = _p50(first["to_first_line"])
    rows = [
        (
            "allocation -> first user line (p50)",
            f"{ours_line:.3f}",
            "n/a",
            "n/a",
            "the trial's allocation created (Ray: no equivalent)",
        ),
        (
            "create -> first user line (p50)",
            f"{ours_first_line:.3f}",
            f"{ray_line:.3f}",
            ratio_text(ray_line, ours_first_line),
            "POST /api/v1/experiments / Tuner.fit() called",
        ),
        (
            "create -> first metric (p50)",
            f"{ours_metric:.3f}",
            "n/a" if ray_metric is None else f"{ray_metric:.3f}",
            ratio_text(ray_metric, ours_metric),
            "POST /api/v1/experiments / Tuner.fit() called",
        ),
    ]
    header = ("measurement (s)", "Stalwart", f"Ray Tune {ray['version']}", "Ray / Stalwart", "from")
    print("\n" + format_table(f"{NAME}: launch latency", header, rows))
    parts = {k: _p50(v) for k, v in first.items()}
    print(
        f"Stalwart create -> first metric, p50 of each part: create -> allocation "
        f"{parts['to_allocation']:.3f} s, allocation -> first line {parts['to_line']:.3f} s, "
        f"import stalwart {parts['import']:.3f} s, core.init() {parts['core_init']:.3f} s, "
        f"first report -> stored {parts['to_metric']:.3f} s"
    )
    measurements = [
        launch,
        Measurement(
            "create_to_first_metric_p50",
            ours_metric,
            "s",
            f"< {FIRST_METRIC_TARGET_S:g} s",
            ours_metric < FIRST_METRIC_TARGET_S,
            {k: latency_stats(v) for k, v in first.items()},
            f"{runs} experiments one after another",
        ),
        Measurement("ray_tune_fit_to_first_line_p50", ray_line, "s", stats=ray),
        Measurement("ray_tune_fit_to_first_result_p50", ray_metric, "s"),
    ]
    setup = {
        "runs": runs,
        "slots": 4,
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
    }
    path = write_results(NAME, options, measurements, {"setup": setup})
    print(f"raw results: {path}")
    return measurements
