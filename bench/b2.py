"""``b2``: metrics ingest and read-back against an MLflow tracking server (issue 10, B2).

Stalwart: ``stalwart master`` (uvicorn, SQLite) in a subprocess on a fresh home; trials with a
RUNNING allocation whose task environment the Core API harness is built from, exactly as in a
task (the ``harness`` benchmark's setup). MLflow: ``mlflow server`` on a SQLite backend store on
the same machine, one worker process (as the master is one process), driven by
``bench/peers/mlflow_metrics.py`` in the peers' virtual environment with ``MlflowClient``.

A *point* is one metric value; every report carries 10 metrics (``m0``..``m9``).

- ``ingest``: one trial (one MLflow run) reports 1,000,000 points: 100,000 reports through
  ``report_training_metrics`` (the harness batches up to 1,000 reports a post); MLflow's
  ``log_batch`` with 1,000 metrics a call (its limit), from the first call until everything is
  acknowledged. Target >= 100,000 points/s.
- ``read_back``: the whole series back: ``GET /api/v1/trials/metrics/trial_metrics`` (the SDK's
  ``trial.iter_metrics``, NDJSON) against ``get_metric_history`` for each of the 10 keys.
  Target < 1 s for 1,000,000 points.
- ``dataframe``: the whole series as one pandas DataFrame (a row per report, a column per
  metric): the SDK's ``trial.metrics_dataframe()`` (Arrow IPC from
  ``GET /api/v1/trials/metrics/arrow``) against ``get_metric_history`` of the 10 keys made into
  a DataFrame; the median of three reads. Target < 0.5 s for 1,000,000 points.
- ``chart_series``: one metric downsampled to 1,000 points, as a chart loads it (p50 of 20
  requests): ``GET /api/v1/trials/{id}/metrics/series?metric=m0&maxPoints=1000`` against the
  MLflow UI's ``GET /ajax-api/2.0/mlflow/metrics/get-history-bulk-interval`` (``max_results``
  1,000). Stalwart's master keeps recent answers, so its side is reported three ways: ``cold``
  (the first request after the ingest), ``uncached`` (p50 of 20 requests each asking for a
  different number of points, 1,000 to 1,019, which the cache cannot answer) and ``cached``
  (p50 of 20 repeats of one request). Target < 50 ms cold and uncached (issue 25).
- ``concurrent``: 100 trials (runs) x 10,000 points at once from 4 client processes of 25
  trials each; points stored per second over the whole, and lost writes: Stalwart reports
  missing from the database afterwards (the harness drops a batch the master refuses), MLflow
  ``log_batch`` calls that raised. Target: none lost.

``--quick``: 200,000 points for the single trial, 100 x 2,000 for the concurrent phase.

MLflow's SQLite store ingests a few thousand points per second here (about a hundred with 100
writers at once), so 1,000,000 points would take it minutes to hours: its side logs 100,000
points into the single run (20,000 with ``--quick``) and 100 x 200 in the concurrent phase, and
the comparison is made on rates (points/s in, points/s back); its chart series is drawn from its
smaller run (which favours it). Stalwart's absolute numbers are what the targets are checked on.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.b1 import ensure_peers_venv
from bench.common import (
    BenchError,
    HttpClient,
    Measurement,
    Options,
    latency_stats,
    running_master,
    write_results,
)
from bench.harness import (
    METRICS_PER_REPORT,
    _check_stored,
    _experiment,
    _metrics,
    _stored,
    _trial_env,
)
from bench.sidebyside import format_table, ratio_text
from stalwart.client import Client
from stalwart.core import TaskEnv
from stalwart.core._context import build_context
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.settings import MasterSettings

__all__ = ["NAME", "rates", "run"]

NAME = "b2"
POINTS = 1_000_000
QUICK_POINTS = 200_000
TRIALS = 100
TRIAL_POINTS = 10_000
QUICK_TRIAL_POINTS = 2_000
MLFLOW_POINTS = 100_000
QUICK_MLFLOW_POINTS = 20_000
MLFLOW_TRIAL_POINTS = 200
QUICK_MLFLOW_TRIAL_POINTS = 200
PROCESSES = 4
CHART_POINTS = 1000
CHART_REQUESTS = 20
INGEST_TARGET = 100_000.0
READ_TARGET_S = 1.0
FRAME_TARGET_S = 0.5
FRAME_READS = 3
CHART_TARGET_MS = 50.0
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "mlflow_metrics.py"


def _ingest(env: TaskEnv, reports: int) -> float:
    """Report ``reports`` x 10 metrics through the harness; seconds until all are acknowledged."""
    payloads = [_metrics(step) for step in range(1, reports + 1)]
    ctx = build_context(env)
    ctx.start()
    started = time.perf_counter()
    report = ctx.train.report_training_metrics
    for step, metrics in enumerate(payloads, start=1):
        report(step, metrics)
    ctx.close()
    return time.perf_counter() - started


def _ingest_many(envs: list[TaskEnv], reports: int, start_at: float) -> tuple[float, str]:
    """Several trials at once (one harness each, reports interleaved).

    Returns the end time and the first error a harness raised ("" when none), as text: what
    was stored is counted afterwards from the database.
    """
    contexts = []
    error = ""
    try:
        for env in envs:
            ctx = build_context(env)
            contexts.append(ctx)
            ctx.start()
        time.sleep(max(0.0, start_at - time.time()))
        for step in range(1, reports + 1):
            metrics = _metrics(step)
            for ctx in contexts:
                ctx.train.report_training_metrics(step, metrics)
    except Exception as exc:  # reported with the result: the harness gave up
        error = f"{type(exc).__name__}: {exc}"
    for ctx in contexts:
        try:
            ctx.close()
        except Exception as exc:
            error = error or f"{type(exc).__name__}: {exc}"
    return time.time(), error


def _read_back(client: HttpClient, trial_id: int) -> tuple[float, int]:
    """Seconds to stream the trial's whole training series, and the points received."""
    started = time.perf_counter()
    status, body = client.request(
        "GET", f"/api/v1/trials/metrics/trial_metrics?trialIds={trial_id}&group=training"
    )
    points = 0
    for line in body.splitlines():
        for report in json.loads(line)["result"]["metrics"]:
            metrics = report["metrics"]
            points += len(metrics.get("avgMetrics") or metrics.get("avg_metrics") or {})
    took = time.perf_counter() - started
    if status != 200:
        raise BenchError(f"reading the metrics back answered HTTP {status}: {body[:300]!r}")
    return took, points


def _dataframe(port: int, home: Path, trial_id: int, points: int) -> list[float]:
    """Seconds for each of :data:`FRAME_READS` reads of the trial's training metrics into a
    pandas DataFrame through the SDK (HTTP, Arrow IPC, ``to_pandas``)."""
    took = []
    with Client(
        f"http://127.0.0.1:{port}", "admin", "", config_dir=home / "sdk", environ={}
    ) as client:
        trial = client.get_trial(trial_id)
        for _ in range(FRAME_READS):
            started = time.perf_counter()
            frame = trial.metrics_dataframe()
            took.append(time.perf_counter() - started)
            held = int(frame.shape[0]) * (int(frame.shape[1]) - 4)  # less the fixed columns
            if held != points:
                raise BenchError(f"the DataFrame holds {held} of {points} points")
    return took


def _chart(client: HttpClient, trial_id: int) -> dict[str, Any]:
    """The chart series request timed cold (first), uncached and cached (see the docstring)."""

    def timed(points: int) -> tuple[float, bytes]:
        path = f"/api/v1/trials/{trial_id}/metrics/series?metric=m0&maxPoints={points}"
        started = time.perf_counter()
        status, body = client.request("GET", path)
        took = time.perf_counter() - started
        if status != 200:
            raise BenchError(f"GET {path} answered HTTP {status}: {body[:300]!r}")
        return took, body

    cold, _ = timed(CHART_POINTS)
    uncached = [timed(CHART_POINTS + 1 + i)[0] for i in range(CHART_REQUESTS)]
    cached = [timed(CHART_POINTS) for _ in range(CHART_REQUESTS)]
    kept = len(json.loads(cached[-1][1])["points"])
    return {
        **latency_stats([took for took, _ in cached]),
        "points": kept,
        "cold_ms": cold * 1000,
        "uncached": latency_stats(uncached),
    }


def _token(port: int) -> str:
    client = HttpClient(port)
    status, body = client.json(
        "POST", "/api/v1/auth/login", {"username": "admin", "password": "", "isHashed": True}
    )
    client.close()
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"login failed: HTTP {status} {body}")
    return str(body["token"])


def _stalwart(engine: Engine, home: Path, points: int, trial_points: int) -> dict[str, Any]:
    reports = points // METRICS_PER_REPORT
    trial_reports = trial_points // METRICS_PER_REPORT
    with running_master(home) as master:
        experiment_id = _experiment(master.port)
        env = _trial_env(engine, master.port, experiment_id)
        assert env.trial is not None
        ingest_s = _ingest(env, reports)
        _check_stored(engine, env, reports)
        client = HttpClient(master.port, {"Authorization": f"Bearer {_token(master.port)}"})
        read_s, read_points = _read_back(client, env.trial.trial_id)
        if read_points != points:
            raise BenchError(f"read back {read_points} of {points} points")
        frame_s = _dataframe(master.port, home, env.trial.trial_id, points)
        chart = _chart(client, env.trial.trial_id)
        client.close()
        envs = [_trial_env(engine, master.port, experiment_id) for _ in range(TRIALS)]
        start_at = time.time() + 2.0
        with ProcessPoolExecutor(PROCESSES) as pool:
            ends = list(
                pool.map(
                    _ingest_many,
                    [envs[i::PROCESSES] for i in range(PROCESSES)],
                    [trial_reports] * PROCESSES,
                    [start_at] * PROCESSES,
                )
            )
        concurrent_s = max(end for end, _ in ends) - start_at
        errors = [error for _, error in ends if error]
        stored = 0
        for trial_env in envs:
            assert trial_env.trial is not None
            stored += _stored(engine, trial_env.trial.trial_id)
    return {
        "points": points,
        "trial_points": trial_points,
        "ingest_s": ingest_s,
        "read_s": read_s,
        "frame_s": frame_s,
        "chart": chart,
        "concurrent_s": concurrent_s,
        "concurrent_stored_points": stored * METRICS_PER_REPORT,
        "concurrent_failed_batches": TRIALS * trial_reports - stored,  # reports not stored
        "concurrent_first_error": errors[0] if errors else "",
        "version": _version(),
    }


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stalwart")
    except PackageNotFoundError:
        return "source"


def _mlflow(work: Path, points: int, trial_points: int) -> dict[str, Any]:
    """MLflow's side (``bench/peers/mlflow_metrics.py`` in the peers' venv); its raw result."""
    python, _ = ensure_peers_venv()
    out = work / "mlflow.json"
    cmd = [str(python), str(PEER_SCRIPT), "--points", str(points), "--trials", str(TRIALS)]
    cmd += ["--trial-points", str(trial_points), "--processes", str(PROCESSES)]
    cmd += ["--chart-points", str(CHART_POINTS), "--chart-requests", str(CHART_REQUESTS)]
    cmd += ["--work", str(work), "--out", str(out)]
    log_path = work / "mlflow-driver.log"
    with log_path.open("wb") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=3600, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise BenchError(f"the MLflow side exited with {done.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    result.update(points=points, trial_points=trial_points)
    return result


def rates(r: dict[str, Any]) -> dict[str, float]:
    """One system's raw result as comparable numbers: points/s in and back, chart p50 in ms."""
    return {
        "ingest": r["points"] / r["ingest_s"],
        "read": r["points"] / r["read_s"],
        "frame": r["points"] / statistics.median(r["frame_s"]),
        "chart": float(r["chart"]["p50_ms"]),
        "concurrent": r.get("concurrent_stored_points", TRIALS * r["trial_points"])
        / r["concurrent_s"],
    }


def _measurements(results: dict[str, dict[str, Any]]) -> list[Measurement]:
    out: list[Measurement] = []
    for system, r in results.items():
        ours = system == "stalwart"
        points, trial_points = r["points"], r["trial_points"]
        rate = rates(r)
        ingest, concurrent, chart_p50 = rate["ingest"], rate["concurrent"], rate["chart"]
        out += [
            Measurement(
                f"{system}_ingest",
                ingest,
                "points/s",
                f">= {INGEST_TARGET:,.0f}/s" if ours else None,
                ingest >= INGEST_TARGET if ours else None,
                {"seconds": r["ingest_s"], "points": points},
            ),
            Measurement(
                f"{system}_read_back",
                r["read_s"],
                "s",
                f"< {READ_TARGET_S:g} s" if ours else None,
                r["read_s"] < READ_TARGET_S if ours else None,
                {"points": points, "points_per_s": rate["read"]},
                f"{points:,} points",
            ),
            Measurement(
                f"{system}_dataframe",
                statistics.median(r["frame_s"]),
                "s",
                f"< {FRAME_TARGET_S:g} s" if ours else None,
                statistics.median(r["frame_s"]) < FRAME_TARGET_S if ours else None,
                {"reads_s": r["frame_s"], "points_per_s": rate["frame"]},
                f"{points:,} points, median of {len(r['frame_s'])}",
            ),
            Measurement(
                f"{system}_chart_series",
                chart_p50,
                "ms p50",
                None,
                None,
                r["chart"],
                "cached on Stalwart's side (repeats of one request)" if ours else "",
            ),
            *(_chart_uncached(r["chart"]) if ours else []),
            Measurement(
                f"{system}_concurrent_ingest",
                concurrent,
                "points/s",
                stats={"seconds": r["concurrent_s"], "points": TRIALS * trial_points},
                note=f"{TRIALS} trials x {trial_points:,} points, {PROCESSES} client processes",
            ),
            Measurement(
                f"{system}_concurrent_lost_writes",
                float(r.get("concurrent_failed_batches", 0)),
                "reports" if ours else "batches",
                "0" if ours else None,
                r.get("concurrent_failed_batches", 0) == 0 if ours else None,
                note=str(r.get("concurrent_first_error", ""))[:200],
            ),
        ]
    return out


def _chart_uncached(chart: dict[str, Any]) -> list[Measurement]:
    """Stalwart's cold and uncached chart series, against the target."""
    cold, uncached = float(chart["cold_ms"]), float(chart["uncached"]["p50_ms"])
    target = f"< {CHART_TARGET_MS:g} ms"
    return [
        Measurement("stalwart_chart_series_cold", cold, "ms", target, cold < CHART_TARGET_MS),
        Measurement(
            "stalwart_chart_series_uncached",
            uncached,
            "ms p50",
            target,
            uncached < CHART_TARGET_MS,
            chart["uncached"],
            f"{CHART_REQUESTS} requests, each for another number of points",
        ),
    ]


def _table(results: dict[str, dict[str, Any]]) -> str:
    base = rates(results["stalwart"])
    rows = []
    for label, unit, key, higher in (
        ("ingest, 1 trial", "points/s", "ingest", True),
        ("read back the whole series", "points/s", "read", True),
        ("the whole series as a DataFrame", "points/s", "frame", True),
        (f"chart series ({CHART_POINTS} points) p50", "ms", "chart", False),
        (f"ingest, {TRIALS} trials at once", "points/s", "concurrent", True),
    ):
        for system, r in results.items():
            if system == "stalwart":
                continue
            theirs = rates(r)[key]
            ours = base[key]
            # "how many times better Stalwart is", for both kinds of number
            adv = ratio_text(ours, theirs) if higher else ratio_text(theirs, ours)
            rows.append((label, unit, f"{ours:,.1f}", f"{theirs:,.1f}", adv))
    for system, r in results.items():
        if system != "stalwart":
            failed = r.get("concurrent_failed_batches", 0)
            ours_failed = results["stalwart"].get("concurrent_failed_batches", 0)
            rows.append(
                (
                    "lost writes, trials at once",
                    "reports / batches",
                    str(ours_failed),
                    str(failed),
                    "-",
                )
            )
    ours_r = results["stalwart"]
    header = ("measurement", "unit", "Stalwart", "MLflow", "Stalwart advantage")
    title = (
        f"{NAME}: metrics, SQLite both sides (Stalwart {ours_r['points']:,} points, "
        f"read back in {ours_r['read_s']:.2f} s)"
    )
    return format_table(title, header, rows)


def run(options: Options) -> list[Measurement]:
    """Run B2 on Stalwart, then on MLflow; print the side-by-side table and write JSON."""
    points = QUICK_POINTS if options.quick else POINTS
    trial_points = QUICK_TRIAL_POINTS if options.quick else TRIAL_POINTS
    work = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-b2-"))
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    if home.exists():
        shutil.rmtree(home)
    results: dict[str, dict[str, Any]] = {}
    load_before = _load()
    engine = make_engine(MasterSettings(home=home).database_url)
    try:
        migrate.upgrade(engine)
        with make_session_factory(engine)() as session:
            bootstrap(session, "")
        print(f"{NAME}: stalwart ...", flush=True)
        results["stalwart"] = _stalwart(engine, home, points, trial_points)
        print(f"{NAME}: mlflow ...", flush=True)
        (work / "mlflow").mkdir(exist_ok=True)
        mlflow_points = QUICK_MLFLOW_POINTS if options.quick else MLFLOW_POINTS
        mlflow_trial = QUICK_MLFLOW_TRIAL_POINTS if options.quick else MLFLOW_TRIAL_POINTS
        results["mlflow"] = _mlflow(work / "mlflow", mlflow_points, mlflow_trial)
    finally:
        engine.dispose()
        if options.workdir is None and not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    measurements = _measurements(results)
    print("\n" + _table(results))
    setup = {
        "points": points,
        "trials": TRIALS,
        "trial_points": trial_points,
        "processes": PROCESSES,
        "versions": {s: r.get("version") for s, r in results.items()},
        "load_average_before": load_before,
        "load_average_after": _load(),
    }
    path = write_results(NAME, options, measurements, {"setup": setup, "raw": results})
    print(f"raw results: {path}")
    return measurements


def _load() -> list[float]:
    """The 1-, 5- and 15-minute load averages (the machine is often shared)."""
    return list(os.getloadavg())
