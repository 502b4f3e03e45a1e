"""B2 on MLflow: a tracking server on SQLite, one run logging N points, read back, chart, 100 runs.

Runs in the peers' virtual environment (``.cache/bench-peers``); ``bench/b2.py`` starts it as

    .cache/bench-peers/bin/python bench/peers/mlflow_metrics.py --points N --trials 100 \
        --trial-points M --processes 4 --chart-points 1000 --chart-requests 20 \
        --work DIR --out RESULT.json

It starts ``mlflow server --backend-store-uri sqlite:///DIR/mlflow.db --workers 1`` on a free
loopback port (one worker process, as Stalwart's master is one process), waits for it, and
measures with ``MlflowClient`` against it:

- ``ingest_s``: ``log_batch`` of N points (10 metrics ``m0``..``m9`` per step, 1,000 metrics a
  call: MLflow's limit per request) into one run, one call after another.
- ``read_s``: ``get_metric_history`` of each of the 10 keys (the whole series).
- ``frame_s``: the same 10 histories made into one pandas DataFrame (a row per step, a column
  per metric), three times.
- ``chart``: ``GET /ajax-api/2.0/mlflow/metrics/get-history-bulk-interval`` for ``m0`` with
  ``max_results`` = chart points (what MLflow's UI calls to draw a chart), timed per request.
- ``concurrent_s``: 100 runs logging M points each at once, from ``--processes`` processes
  with one thread per run; from a common start time to the last call's return. A
  ``log_batch`` that raises (the client gives up after its retries, e.g. when SQLite stays
  locked) is counted in ``concurrent_failed_batches``, and the points stored are counted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

METRICS_PER_STEP = 10
BATCH = 1000  # MLflow's log_batch limit on metrics per request
FRAME_READS = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _batches(run_id: str, points: int) -> list[list[Any]]:
    from mlflow.entities import Metric  # type: ignore[import-not-found]

    steps = points // METRICS_PER_STEP
    now = int(time.time() * 1000)
    metrics = [
        Metric(f"m{i}", step * 0.001 + i, now, step)
        for step in range(1, steps + 1)
        for i in range(METRICS_PER_STEP)
    ]
    return [metrics[i : i + BATCH] for i in range(0, len(metrics), BATCH)]


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient  # type: ignore[import-not-found]

    return MlflowClient(tracking_uri=uri)


def _log_runs(uri: str, run_ids: list[str], points: int, start_at: float) -> tuple[float, int, str]:
    """Log ``points`` into each run, one thread per run, from ``start_at``.

    Returns the end time, the number of ``log_batch`` calls that raised, and the first error.
    """
    client = _client(uri)
    work = {run_id: _batches(run_id, points) for run_id in run_ids}
    errors: list[str] = []

    def log(run_id: str) -> None:
        for batch in work[run_id]:
            try:
                client.log_batch(run_id, metrics=batch, synchronous=True)
            except Exception as exc:  # counted and reported: the client gave up on this batch
                errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")

    threads = [threading.Thread(target=log, args=(run_id,)) for run_id in run_ids]
    time.sleep(max(0.0, start_at - time.time()))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.time(), len(errors), errors[0] if errors else ""


def _serve(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    mlflow = Path(sys.executable).parent / "mlflow"
    cmd = [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    cmd += ["--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}"]
    cmd += ["--default-artifact-root", str(work / "artifacts")]
    log = (work / "mlflow-server.log").open("wb")
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"mlflow server exited with {proc.returncode}; see its log")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("mlflow server did not start within 600 s")


def _chart(port: int, run_id: str, points: int, requests: int) -> dict[str, Any]:
    path = (
        "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval"
        f"?run_ids={run_id}&metric_key=m0&max_results={points}"
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    samples = []
    kept = 0
    for _ in range(requests):
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        samples.append(time.perf_counter() - started)
        if response.status != 200:
            raise SystemExit(f"GET {path} answered {response.status}: {body[:300]!r}")
        kept = len(json.loads(body).get("metrics", []))
    ordered = sorted(samples)
    return {
        "count": len(ordered),
        "p50_ms": ordered[len(ordered) // 2] * 1e3,
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1e3,
        "max_ms": ordered[-1] * 1e3,
        "points": kept,
    }


def _frame(client: Any, run_id: str, points: int) -> float:
    """Seconds to read the run's 10 series into one pandas DataFrame (a row per step, a
    column per metric), the way a notebook does with ``get_metric_history``."""
    import pandas as pd

    started = time.perf_counter()
    columns: dict[str, Any] = {}
    for i in range(METRICS_PER_STEP):
        history = client.get_metric_history(run_id, f"m{i}")
        if not columns:
            columns["step"] = [m.step for m in history]
        columns[f"m{i}"] = [m.value for m in history]
    frame = pd.DataFrame(columns)
    took = time.perf_counter() - started
    if frame.size - len(frame) != points:
        raise SystemExit(f"the DataFrame holds {frame.size - len(frame)} of {points} points")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, required=True)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--trial-points", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--chart-points", type=int, default=1000)
    parser.add_argument("--chart-requests", type=int, default=20)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from importlib.metadata import version

    proc, port = _serve(args.work)
    uri = f"http://127.0.0.1:{port}"
    try:
        client = _client(uri)
        experiment = client.create_experiment("b2")
        run_id = client.create_run(experiment).info.run_id
        batches = _batches(run_id, args.points)
        started = time.perf_counter()
        for batch in batches:
            client.log_batch(run_id, metrics=batch, synchronous=True)
        ingest_s = time.perf_counter() - started
        started = time.perf_counter()
        read = sum(len(client.get_metric_history(run_id, f"m{i}")) for i in range(10))
        read_s = time.perf_counter() - started
        if read != args.points:
            raise SystemExit(f"read back {read} of {args.points} points")
        frame_s = [_frame(client, run_id, args.points) for _ in range(FRAME_READS)]
        chart = _chart(port, run_id, args.chart_points, args.chart_requests)
        run_ids = [client.create_run(experiment).info.run_id for _ in range(args.trials)]
        start_at = time.time() + 3.0
        groups = [run_ids[i :: args.processes] for i in range(args.processes)]
        with ProcessPoolExecutor(args.processes) as pool:
            ends = list(
                pool.map(
                    _log_runs,
                    [uri] * args.processes,
                    groups,
                    [args.trial_points] * args.processes,
                    [start_at] * args.processes,
                )
            )
        concurrent_s = max(end for end, _, _ in ends) - start_at
        failed = sum(n for _, n, _ in ends)
        first_error = next((e for _, _, e in ends if e), "")
        stored = sum(len(client.get_metric_history(r, f"m{i}")) for r in run_ids for i in range(10))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    result = {
        "version": version("mlflow"),
        "ingest_s": ingest_s,
        "read_s": read_s,
        "frame_s": frame_s,
        "chart": chart,
        "concurrent_s": concurrent_s,
        "concurrent_failed_batches": failed,
        "concurrent_first_error": first_error,
        "concurrent_stored_points": stored,
        "server": "mlflow server --workers 1, SQLite backend store",
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
