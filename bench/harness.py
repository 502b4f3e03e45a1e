"""``harness``: the Core API harness (``stalwart.core``) reporting metrics to a real master.

Setup: ``stalwart master`` (uvicorn, SQLite) in a subprocess on a fresh home; an experiment made
through ``POST /api/v1/experiments``; for each measurement a new trial with a RUNNING allocation
(rows written with the master's own services), whose task environment (``DET_*``) the harness
is built from, exactly as in a task. The harness runs in this process, the master in its own.

- ``report_call_us``: the cost of ``core_context.train.report_training_metrics(step, metrics)``
  on the training thread: each of 100,000 back-to-back calls (10 metrics each) timed with
  ``perf_counter_ns``, while the harness's metrics thread ships them. Target: mean < 50 µs.
  The mean includes any time a call waits because the bounded queue is full (back-pressure
  from the master), so it is also bounded by the end-to-end rate below.
- ``points_per_s``: 1,000,000 metric values (100,000 reports of 10 metrics) from one trial,
  from the first call until ``close()`` returns, i.e. the master has acknowledged every batch;
  the stored reports are then counted and must all be there. Target >= 100,000 points/s.

``--quick`` sends 20,000 reports per measurement.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from bench.common import (
    BenchError,
    HttpClient,
    Measurement,
    Options,
    latency_stats,
    print_table,
    running_master,
    write_results,
)
from stalwart.core import TaskEnv
from stalwart.core._context import build_context
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Experiment, MetricReport
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.tasks import create_trial, start_allocation
from stalwart.master.settings import MasterSettings
from stalwart.master.transitions import set_allocation_state

__all__ = ["NAME", "run"]

NAME = "harness"
REPORTS = 100_000
QUICK_REPORTS = 20_000
METRICS_PER_REPORT = 10
CALL_TARGET_US = 50.0
POINTS_TARGET = 100_000.0

CONFIG = """\
name: harness-bench
entrypoint: python3 train.py
hyperparameters:
  lr: 0.01
searcher:
  name: single
  metric: loss
  max_length: {batches: 100000}
"""


def _experiment(port: int) -> int:
    client = HttpClient(port)
    status, body = client.json(
        "POST", "/api/v1/auth/login", {"username": "admin", "password": "", "isHashed": True}
    )
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"login failed: HTTP {status} {body}")
    client.close()
    client = HttpClient(port, {"Authorization": f"Bearer {body['token']}"})
    status, body = client.json(
        "POST",
        "/api/v1/experiments",
        {"activate": False, "config": CONFIG, "modelDefinition": []},
    )
    client.close()
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"POST /api/v1/experiments failed: HTTP {status} {body}")
    return int(body["experiment"]["id"])


def _cluster_id(port: int) -> str:
    client = HttpClient(port)
    status, body = client.json("GET", "/info")
    client.close()
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"GET /info failed: HTTP {status}")
    return str(body.get("clusterId") or body.get("cluster_id") or "bench")


def _trial_env(engine: Engine, port: int, experiment_id: int) -> TaskEnv:
    """A new ACTIVE trial with a RUNNING allocation; the task environment of its process."""
    with make_session_factory(engine)() as session:
        experiment = session.get(Experiment, experiment_id)
        if experiment is None:
            raise BenchError(f"experiment {experiment_id} is not in the database")
        trial = create_trial(session, experiment, hparams={"lr": 0.01}, seed=1)
        allocation, token = start_allocation(session, trial.task_id, slots=1)
        set_allocation_state(session, allocation, "RUNNING")
        session.commit()
        environ = {
            "DET_MASTER": f"http://127.0.0.1:{port}",
            "DET_CLUSTER_ID": _cluster_id(port),
            "DET_AGENT_ID": "bench",
            "DET_SLOT_IDS": "[0]",
            "DET_TASK_ID": trial.task_id,
            "DET_ALLOCATION_ID": allocation.id,
            "DET_SESSION_TOKEN": token,
            "DET_TASK_TYPE": "TRIAL",
            "DET_TRIAL_ID": str(trial.id),
            "DET_EXPERIMENT_ID": str(experiment_id),
            "DET_TRIAL_RUN_ID": str(trial.run_id),
            "DET_TRIAL_SEED": "1",
            "DET_HPARAMS": json.dumps(trial.hparams),
            "DET_EXPERIMENT_CONFIG": json.dumps(experiment.config),
            "DET_STEPS_COMPLETED": "0",
            "DET_USER": "admin",
        }
    env = TaskEnv.from_environ(environ)
    if env is None or env.trial is None:
        raise BenchError("could not build the trial's task environment")
    return env


def _metrics(step: int) -> dict[str, float]:
    return {f"m{i}": step * 0.001 + i for i in range(METRICS_PER_REPORT)}


def _stored(engine: Engine, trial_id: int) -> int:
    with engine.connect() as conn:
        count = conn.scalar(
            select(func.count()).select_from(MetricReport).where(MetricReport.trial_id == trial_id)
        )
    return int(count or 0)


def _check_stored(engine: Engine, env: TaskEnv, expected: int) -> None:
    assert env.trial is not None
    stored = _stored(engine, env.trial.trial_id)
    if stored != expected:
        raise BenchError(f"the master stored {stored} of {expected} reports")


def _call_cost(engine: Engine, env: TaskEnv, reports: int) -> Measurement:
    """``report_training_metrics`` timed call by call on this (the training) thread."""
    samples = [0] * reports
    payloads = [_metrics(step) for step in range(1, reports + 1)]
    with build_context(env) as ctx:
        report = ctx.train.report_training_metrics
        clock = time.perf_counter_ns
        for i, metrics in enumerate(payloads):
            started = clock()
            report(i + 1, metrics)
            samples[i] = clock() - started
    _check_stored(engine, env, reports)
    micros = [s / 1e3 for s in samples]
    mean = statistics.fmean(micros)
    stats = latency_stats([s / 1e9 for s in samples])
    stats["mean_us"] = mean
    ordered = sorted(micros)
    note = (
        f"p50 {ordered[len(ordered) // 2]:.1f} µs, p99 {ordered[int(len(ordered) * 0.99)]:.1f} µs, "
        f"max {ordered[-1] / 1e3:.1f} ms, n={reports}"
    )
    return Measurement(
        "report_call_us",
        mean,
        "µs mean",
        f"< {CALL_TARGET_US:.0f} µs",
        mean < CALL_TARGET_US,
        stats,
        note,
    )


def _throughput(engine: Engine, env: TaskEnv, reports: int) -> list[Measurement]:
    """``reports`` x 10 metrics from one trial until the master has acknowledged them all."""
    payloads = [_metrics(step) for step in range(1, reports + 1)]
    ctx = build_context(env)
    ctx.start()
    started = time.perf_counter()
    report = ctx.train.report_training_metrics
    for step, metrics in enumerate(payloads, start=1):
        report(step, metrics)
    queued = time.perf_counter()
    ctx.close()
    done = time.perf_counter()
    _check_stored(engine, env, reports)
    points = reports * METRICS_PER_REPORT
    rate = points / (done - started)
    stats: dict[str, Any] = {
        "reports": reports,
        "points": points,
        "calls_s": queued - started,
        "total_s": done - started,
        "flush_s": done - queued,
    }
    return [
        Measurement(
            "points_per_s",
            rate,
            "points/s",
            f">= {POINTS_TARGET:,.0f}/s",
            rate >= POINTS_TARGET,
            stats,
            f"{points:,} points in {done - started:.2f} s ({reports:,} reports of "
            f"{METRICS_PER_REPORT}); close() waited {done - queued:.2f} s",
        ),
        Measurement(
            "reports_per_s",
            reports / (done - started),
            "reports/s",
            note="the same run counted in reports",
        ),
    ]


def run(options: Options) -> list[Measurement]:
    """Set up, measure, print and write the results; return the measurements."""
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    if home.exists():
        shutil.rmtree(home)
    settings = MasterSettings(home=home)
    engine = make_engine(settings.database_url)
    reports = QUICK_REPORTS if options.quick else REPORTS
    measurements: list[Measurement] = []
    try:
        migrate.upgrade(engine)
        with make_session_factory(engine)() as session:
            bootstrap(session, "")
        with running_master(home) as master:
            experiment_id = _experiment(master.port)
            measurements.append(
                _call_cost(engine, _trial_env(engine, master.port, experiment_id), reports)
            )
            measurements += _throughput(
                engine, _trial_env(engine, master.port, experiment_id), reports
            )
    finally:
        engine.dispose()
        if not options.keep and options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(NAME, measurements)
    path = write_results(
        NAME, options, measurements, {"setup": {"reports": reports, "metrics": METRICS_PER_REPORT}}
    )
    print(f"\nraw results: {path}")
    return measurements
