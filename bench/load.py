"""``load``: many trials reporting metrics at a steady rate to one master on PostgreSQL.

Setup: a private schema in PostgreSQL (``STALWART_BENCH_PG_URL``, default
``postgresql://postgres@127.0.0.1:5432/test``; dropped afterwards), a real ``stalwart master``
process on it (:class:`~stalwart.local.LocalCluster`), one paused experiment created through
the API and ``trials`` ACTIVE trials under it, each with its own allocation and token
(:func:`~stalwart.master.services.tasks.start_allocation`, as the scheduler gives a task).

Load: each simulated trial is a thread with its own keep-alive connection and its allocation
token. Its reports fall due on a fixed schedule, ``rate_hz`` a second for ``duration_s`` (open
loop: a slow master does not lower the offered rate). It ships them as the harness's metrics
thread does: one ``POST /api/v1/trials/metrics/batch`` at a time carrying every due report not
yet acknowledged (at most ``MAX_BATCH``), so batches stay at one report while the master keeps
up and grow when it falls behind; a batch that is not answered 200 is sent again after a short
pause until it is. Threads are spread over a few processes so the client side is not limited by
one GIL.

Results (:class:`LoadResult`): posts, reports acknowledged, retries; **ingest latency** per
report, from the moment it fell due to its acknowledgement (p50, p95, p99, max: what a trial's
report waits, batching included), and the round trip of each post; the rows stored per trial
and step in the database, which must be exactly the reports acknowledged (no loss, no
duplicate); and the master's RSS, sampled every second: its growth from the end of the first
quarter of the run to the end is what "flat" is judged on.

``python -m bench run load``: 100 trials x 10 Hz x 5 minutes (``--quick``: 100 x 10 Hz x 30 s).
``tests/reliability/test_load.py`` runs the same code shortened (20 trials x 10 Hz x 20 s).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import create_engine, func, select, text

from bench.common import (
    BenchError,
    HttpClient,
    Measurement,
    Options,
    latency_stats,
    print_table,
    write_results,
)
from stalwart.local import LocalCluster
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Experiment, MetricReport, Task, Trial
from stalwart.master.services.tasks import start_allocation

__all__ = [
    "NAME",
    "LoadPlan",
    "LoadResult",
    "create_experiment",
    "pg_schema",
    "run",
    "run_load",
    "seed_trials",
]

NAME = "load"
PG_URL = os.environ.get("STALWART_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
P99_TARGET_MS = 100.0
RSS_GROWTH_TARGET_MB = 50.0
RETRY_PAUSE_S = 0.2
MAX_BATCH = 1000
BATCH_PATH = "/api/v1/trials/metrics/batch"

CONFIG = """\
name: load
entrypoint: python3 train.py
hyperparameters:
  lr: 0.01
searcher:
  name: single
  metric: loss
  max_length: {batches: 1000000}
resources:
  slots_per_trial: 1
"""


@dataclass(frozen=True)
class LoadPlan:
    """How much load: ``trials`` simulated trials, each ``rate_hz`` reports/s for
    ``duration_s`` seconds, each report carrying ``metrics`` numbers."""

    trials: int = 100
    rate_hz: float = 10.0
    duration_s: float = 300.0
    metrics: int = 4

    @property
    def reports_per_trial(self) -> int:
        return int(self.rate_hz * self.duration_s)


@dataclass
class LoadResult:
    """What a load run measured (see the module docstring)."""

    plan: LoadPlan
    posts: int = 0
    acknowledged: int = 0
    retries: int = 0
    first_error: str = ""
    latency: dict[str, float] = field(default_factory=dict)
    request_latency: dict[str, float] = field(default_factory=dict)
    stored: int = 0
    lost: int = 0
    duplicated: int = 0
    wall_s: float = 0.0
    rss_mb: list[tuple[float, float]] = field(default_factory=list)

    @property
    def rss_growth_mb(self) -> float:
        """Master RSS at the end minus at the end of the first quarter (warm-up excluded)."""
        if len(self.rss_mb) < 4:
            return 0.0
        quarter = len(self.rss_mb) // 4
        warm = statistics.median(v for _, v in self.rss_mb[quarter : quarter + 3])
        end = statistics.median(v for _, v in self.rss_mb[-3:])
        return end - warm

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        out["rss_growth_mb"] = self.rss_growth_mb
        out["rss_mb"] = [[round(t, 1), round(v, 1)] for t, v in self.rss_mb]
        return out


@contextmanager
def pg_schema(base_url: str = PG_URL) -> Iterator[str]:
    """A PostgreSQL URL whose schema is private to the block (dropped afterwards).

    BenchError when PostgreSQL is not reachable.
    """
    engine = create_engine(base_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:
        engine.dispose()
        raise BenchError(f"PostgreSQL at {base_url} is not reachable: {exc}") from exc
    schema = f"load_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f'create schema "{schema}"'))
    sep = "&" if "?" in base_url else "?"
    try:
        yield f"{base_url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'drop schema "{schema}" cascade'))
        engine.dispose()


def create_experiment(url: str) -> int:
    """A paused experiment made through the API (the cluster loop leaves its trials alone)."""
    with httpx.Client(base_url=url, timeout=60) as http:
        login = http.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
        login.raise_for_status()
        http.headers["Authorization"] = f"Bearer {login.json()['token']}"
        content = "cHJpbnQoJ2hpJyk="  # print('hi')
        files = [{"path": "train.py", "type": 48, "content": content, "mode": 0o100644}]
        body = {"config": CONFIG, "modelDefinition": files, "activate": False}
        created = http.post("/api/v1/experiments", json=body)
        if created.status_code != 200:
            raise BenchError(f"creating the experiment: HTTP {created.status_code} {created.text}")
        return int(created.json()["experiment"]["id"])


def seed_trials(db_url: str, experiment_id: int, count: int) -> list[dict[str, Any]]:
    """``count`` ACTIVE trials of the experiment, each with a new allocation: ids, run ids and
    allocation tokens."""
    engine = make_engine(db_url)
    out: list[dict[str, Any]] = []
    try:
        with make_session_factory(engine)() as session:
            experiment = session.get(Experiment, experiment_id)
            if experiment is None:
                raise BenchError(f"experiment {experiment_id} is not in the database")
            for _ in range(count):
                request = str(uuid.uuid4())
                task_id = f"{experiment_id}.{request}"
                trial = Trial(
                    experiment_id=experiment_id,
                    request_id=request,
                    task_id=task_id,
                    state="ACTIVE",
                    hparams={"lr": 0.01},
                    seed=len(out),
                )
                session.add(trial)
                session.flush()
                session.add(
                    Task(
                        task_id=task_id,
                        task_type="TRIAL",
                        owner_id=experiment.owner_id,
                        experiment_id=experiment_id,
                        trial_id=trial.id,
                        name=f"Trial {trial.id} (Experiment {experiment_id})",
                    )
                )
                session.flush()
                _, token = start_allocation(session, task_id, slots=1)
                out.append({"trial_id": trial.id, "run_id": trial.run_id, "token": token})
            session.commit()
    finally:
        engine.dispose()
    return out


def _report(target: dict[str, Any], step: int, metrics: int) -> bytes:
    """One report as the harness encodes it (the single-report body)."""
    values = {f"m{i}": 1.0 / (step + i) for i in range(metrics)}
    return json.dumps(
        {
            "group": "training",
            "metrics": {
                "metrics": {"avgMetrics": values, "batchMetrics": None},
                "trialId": target["trial_id"],
                "trialRunId": target["run_id"],
                "stepsCompleted": step,
                "reportTime": None,
            },
        }
    ).encode()


def _trial_thread(
    port: int, target: dict[str, Any], plan: LoadPlan, start_at: float, out: dict[str, Any]
) -> None:
    """One simulated trial: report ``step`` falls due at ``start_at + (step - 1) / rate_hz``;
    the shipper posts every due report not yet acknowledged in one batch (at most
    ``MAX_BATCH``), retrying a batch until it is acknowledged, as the harness's shipper does."""
    headers = {"Grpc-Metadata-x-allocation-token": f"Bearer {target['token']}"}
    client = HttpClient(port, headers)
    total = plan.reports_per_trial
    interval = 1.0 / plan.rate_hz
    ingest: list[float] = []  # report due -> acknowledged
    requests: list[float] = []  # one POST's round trip
    posts = retries = 0
    first_error = ""
    done = 0  # reports 1..done are acknowledged
    try:
        while done < total:
            due = min(total, int((time.time() - start_at) / interval) + 1)
            if due <= done:
                time.sleep(max(0.0, start_at + done * interval - time.time()))
                continue
            last = min(due, done + MAX_BATCH)
            steps = range(done + 1, last + 1)
            body = b'{"reports":[' + b",".join(_report(target, n, plan.metrics) for n in steps)
            body += b"]}"
            posts += 1
            started = time.perf_counter()
            try:
                status, raw = client.request("POST", BATCH_PATH, body)
            except OSError as exc:
                status, raw = 0, str(exc).encode()
            if status == 200:
                now = time.time()
                requests.append(time.perf_counter() - started)
                ingest.extend(now - (start_at + (n - 1) * interval) for n in steps)
                done = last
                continue
            retries += 1
            if not first_error:
                first_error = f"HTTP {status} {raw[:200].decode(errors='replace')}"
            if retries > 50 + total // 10:
                raise BenchError(f"trial {target['trial_id']}: too many failures: {first_error}")
            time.sleep(RETRY_PAUSE_S)
    finally:
        client.close()
    out.update(
        posts=posts, retries=retries, first_error=first_error, ingest=ingest, requests=requests
    )


def _worker(port: int, targets: list[dict[str, Any]], plan: LoadPlan, start_at: float) -> Any:
    """One client process: a thread per trial; the per-trial results."""
    results: list[dict[str, Any]] = [{} for _ in targets]
    threads = [
        threading.Thread(target=_trial_thread, args=(port, t, plan, start_at, r), daemon=True)
        for t, r in zip(targets, results, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=plan.duration_s * 3 + 120)
    return results


def _count_stored(db_url: str, targets: list[dict[str, Any]]) -> tuple[int, int, int]:
    """``(stored rows, duplicated rows, distinct (trial, step) pairs)`` of the load trials."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(MetricReport.trial_id, MetricReport.steps_completed, func.count())
                .where(MetricReport.trial_id.in_([t["trial_id"] for t in targets]))
                .group_by(MetricReport.trial_id, MetricReport.steps_completed)
            ).all()
    finally:
        engine.dispose()
    stored = sum(int(n) for _, _, n in rows)
    duplicated = sum(int(n) - 1 for _, _, n in rows if n > 1)
    return stored, duplicated, len(rows)


def run_load(cluster: LocalCluster, db_url: str, plan: LoadPlan) -> LoadResult:
    """Seed ``plan.trials`` trials on the running ``cluster`` and put the load on it."""
    if cluster.master is None:
        raise BenchError("the master is not running")
    master = psutil.Process(cluster.master.pid)
    experiment_id = create_experiment(cluster.url)
    targets = seed_trials(db_url, experiment_id, plan.trials)
    processes = max(1, min(4, plan.trials // 25))
    groups = [targets[i::processes] for i in range(processes)]
    result = LoadResult(plan=plan)
    context = multiprocessing.get_context("spawn")
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        start_at = time.time() + 3.0  # every process is up by then
        futures = [pool.submit(_worker, cluster.port, g, plan, start_at) for g in groups]
        while not all(f.done() for f in futures):
            now = time.time()
            if now >= start_at:
                result.rss_mb.append((now - start_at, master.memory_info().rss / 2**20))
            time.sleep(1.0)
        per_trial = [r for f in futures for r in f.result()]
    result.wall_s = time.perf_counter() - began
    if any(not r for r in per_trial):
        raise BenchError("a simulated trial did not finish")
    ingest = [s for r in per_trial for s in r["ingest"]]
    result.posts = sum(r["posts"] for r in per_trial)
    result.retries = sum(r["retries"] for r in per_trial)
    result.acknowledged = len(ingest)
    result.first_error = next((r["first_error"] for r in per_trial if r["first_error"]), "")
    result.latency = latency_stats(ingest)
    result.request_latency = latency_stats([s for r in per_trial for s in r["requests"]])
    result.stored, result.duplicated, distinct = _count_stored(db_url, targets)
    result.lost = plan.trials * plan.reports_per_trial - distinct
    return result


def measurements(result: LoadResult) -> list[Measurement]:
    """The benchmark's table rows: loss, p99 ingest latency, RSS growth."""
    plan = result.plan
    expected = plan.trials * plan.reports_per_trial
    p99 = result.latency.get("p99_ms")
    growth = result.rss_growth_mb
    where = f"{plan.trials} trials x {plan.rate_hz:g} Hz x {plan.duration_s:g} s"
    return [
        Measurement(
            "reports_lost_or_duplicated",
            float(result.lost + result.duplicated),
            "reports",
            "0",
            result.lost == 0 and result.duplicated == 0,
            {"expected": expected, "stored": result.stored, "retries": result.retries},
            f"{where}: {result.stored} of {expected} stored in {result.posts} posts, "
            f"{result.retries} retried"
            + (f" (first error: {result.first_error[:80]})" if result.first_error else ""),
        ),
        Measurement(
            "ingest_p99",
            p99,
            "ms",
            f"< {P99_TARGET_MS:.0f} ms",
            None if p99 is None else p99 < P99_TARGET_MS,
            result.latency,
            f"report due -> stored: p50 {result.latency.get('p50_ms', 0):.1f} ms, p95 "
            f"{result.latency.get('p95_ms', 0):.1f} ms, max {result.latency.get('max_ms', 0):.0f}"
            f" ms; post round trip p99 {result.request_latency.get('p99_ms', 0):.1f} ms",
        ),
        Measurement(
            "master_rss_growth",
            growth,
            "MB",
            f"< {RSS_GROWTH_TARGET_MB:.0f} MB",
            growth < RSS_GROWTH_TARGET_MB,
            {"samples": len(result.rss_mb)},
            f"RSS {result.rss_mb[0][1]:.0f} -> {result.rss_mb[-1][1]:.0f} MB over the run"
            if result.rss_mb
            else "no samples",
        ),
    ]


MASTER_CONFIG = "cluster:\n  tick: 1\n"


def run(options: Options) -> list[Measurement]:
    """``python -m bench run load``: set up, load, print and write the results."""
    plan = LoadPlan(duration_s=30.0 if options.quick else 300.0)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "master.yaml"
    config.write_text(MASTER_CONFIG)
    try:
        with pg_schema() as db_url:
            cluster = LocalCluster(
                home=workdir / "home", port=_free_port(), db=db_url, master_config=config
            )
            cluster.start_master()
            try:
                result = run_load(cluster, db_url, plan)
            finally:
                cluster.stop()
    finally:
        if not options.keep and options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    rows = measurements(result)
    print_table(NAME, rows)
    path = write_results(NAME, options, rows, {"load": result.summary()})
    print(f"\nraw results: {path}")
    return rows


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
