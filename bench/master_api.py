"""``master_api``: the master's REST API on SQLite, through a real uvicorn server on loopback.

Setup: a fresh master home; one experiment created through ``POST /api/v1/experiments`` (so its
row is exactly what the master stores), cloned with SQLAlchemy to 10,000 experiments with one trial
each; one allocation per load client (its token authenticates metric reports, as in a task).
Then ``stalwart master`` serves that home in a subprocess and the measurements run:

- ``get_experiment``: latency of ``GET /api/v1/experiments/{id}`` (random ids, one client,
  sequential requests). Target p95 < 20 ms.
- ``list_experiments_100``: latency of ``GET /api/v1/experiments?limit=100&offset=N`` (random
  pages). Target p95 < 20 ms.
- ``metric_ingest``: reports/s of ``POST /api/v1/trials/{id}/metrics`` (wire doc 5.5 body,
  allocation-token header, no Content-Type, as the harness sends) from ``--clients`` processes,
  one trial each. Target >= 20,000 reports/s. Stored rows are counted afterwards.
- ``floor_get_master``: latency of ``GET /api/v1/master`` (token check plus a small response):
  the least any authenticated GET costs here (a reference, no target).
- ``http_ceiling_info``: requests/s of ``GET /info`` with the same clients: the most any endpoint
  could reach on this machine with one server process (a reference, no target).
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, insert, select

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
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Experiment, MetricReport, Task, Trial
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.tasks import start_allocation
from stalwart.master.settings import MasterSettings

__all__ = ["NAME", "run"]

NAME = "master_api"
EXPERIMENTS = 10_000
PAGE = 100
LATENCY_TARGET_MS = 20.0
INGEST_TARGET = 20_000.0

CONFIG = """\
name: bench
description: a benchmark experiment
entrypoint: python3 train.py
labels: [bench, sqlite]
hyperparameters:
  lr: 0.01
  layers: {type: int, minval: 1, maxval: 8}
searcher:
  name: single
  metric: validation_loss
  max_length: {batches: 1000}
resources:
  slots_per_trial: 1
"""
TERMINAL = ("COMPLETED", "CANCELED", "ERROR")
STATES = ("COMPLETED", "COMPLETED", "COMPLETED", "ACTIVE", "PAUSED", "CANCELED", "ERROR")


def _model_definition() -> list[dict[str, Any]]:
    source = b"import determined as det\n\nprint('training')\n"
    return [
        {
            "path": "train.py",
            "type": 48,
            "content": base64.b64encode(source).decode(),
            "mode": 0o100644,
            "mtime": "1700000000",
            "uid": 0,
            "gid": 0,
        }
    ]


def _login(port: int) -> str:
    client = HttpClient(port)
    status, body = client.json(
        "POST", "/api/v1/auth/login", {"username": "admin", "password": "", "isHashed": True}
    )
    client.close()
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"login failed: HTTP {status} {body}")
    return str(body["token"])


def _create_template(port: int, token: str) -> int:
    client = HttpClient(port, {"Authorization": f"Bearer {token}"})
    status, body = client.json(
        "POST",
        "/api/v1/experiments",
        {
            "activate": True,
            "config": CONFIG,
            "modelDefinition": _model_definition(),
            "parentId": None,
            "projectId": None,
            "template": None,
            "validateOnly": False,
        },
    )
    client.close()
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"POST /api/v1/experiments failed: HTTP {status} {body}")
    return int(body["experiment"]["id"])


def _seed(engine: Engine, template_id: int, total: int) -> list[int]:
    """Clone the template experiment to ``total`` experiments with one trial each; return ids."""
    sessions = make_session_factory(engine)
    rng = random.Random(7)
    with sessions() as session:
        template = session.get(Experiment, template_id)
        if template is None:
            raise BenchError(f"experiment {template_id} is not in the database")
        base = {
            attr.key: getattr(template, attr.key)
            for attr in Experiment.__mapper__.column_attrs
            if attr.key != "id"
        }
        rows = []
        for i in range(1, total):
            state = STATES[i % len(STATES)]
            start = template.start_time - timedelta(minutes=total - i)
            rows.append(
                {
                    **base,
                    "name": f"{template.name} {i}",
                    "job_id": str(uuid.uuid4()),
                    "state": state,
                    "start_time": start,
                    "end_time": start + timedelta(minutes=30) if state in TERMINAL else None,
                    "progress": 1.0 if state == "COMPLETED" else rng.random(),
                }
            )
        for chunk in range(0, len(rows), 1000):
            session.execute(insert(Experiment), rows[chunk : chunk + 1000])
        with_trials = set(session.scalars(select(Trial.experiment_id).distinct()))
        ids = [  # the template may have its trial already (the master creates it)
            i
            for i in session.scalars(select(Experiment.id).order_by(Experiment.id))
            if i not in with_trials
        ]
        next_trial = (session.scalar(select(func.max(Trial.id))) or 0) + 1
        trials, tasks = [], []
        for offset, exp_id in enumerate(ids):
            request = str(uuid.uuid4())
            task_id = f"{exp_id}.{request}"
            trial_id = next_trial + offset
            trials.append(
                {
                    "id": trial_id,
                    "experiment_id": exp_id,
                    "request_id": request,
                    "task_id": task_id,
                    "state": "COMPLETED",
                    "hparams": {"lr": 0.01, "layers": rng.randint(1, 8)},
                    "seed": rng.randint(0, 2**31),
                    "total_batches": 1000,
                }
            )
            tasks.append(
                {
                    "task_id": task_id,
                    "task_type": "TRIAL",
                    "owner_id": template.owner_id,
                    "experiment_id": exp_id,
                    "trial_id": trial_id,
                    "name": f"Trial {trial_id} (Experiment {exp_id})",
                }
            )
        for chunk in range(0, len(trials), 1000):
            session.execute(insert(Task), tasks[chunk : chunk + 1000])
            session.execute(insert(Trial), trials[chunk : chunk + 1000])
        session.commit()
    return ids


def _ingest_trials(engine: Engine, experiment_ids: list[int], count: int) -> list[dict[str, Any]]:
    """One ACTIVE trial with a fresh allocation per client: ids, run ids, allocation tokens."""
    sessions = make_session_factory(engine)
    out = []
    with sessions() as session:
        for exp_id in experiment_ids[:count]:
            trial = session.scalars(select(Trial).where(Trial.experiment_id == exp_id)).one()
            trial.state = "ACTIVE"  # bench data, written before the master runs
            _, token = start_allocation(session, trial.task_id, slots=1)
            out.append({"trial_id": trial.id, "run_id": trial.run_id, "token": token})
        session.commit()
    return out


def _latency(
    port: int, token: str, paths: list[str], warmup: int, check: Callable[[Any], str]
) -> tuple[list[float], str]:
    """Sequential GETs of ``paths``; return latencies and a note (empty when all is well)."""
    client = HttpClient(port, {"Authorization": f"Bearer {token}"})
    try:
        status, body = client.json("GET", paths[0])
        if status != 200:
            raise _UnavailableError(f"not available: HTTP {status} {_message(body)}")
        note = check(body)
        for path in paths[:warmup]:
            client.request("GET", path)
        samples = []
        for path in paths:
            started = time.perf_counter()
            status, _ = client.request("GET", path)
            samples.append(time.perf_counter() - started)
            if status != 200:
                raise BenchError(f"GET {path}: HTTP {status}")
        return samples, note
    finally:
        client.close()


class _UnavailableError(Exception):
    """The endpoint is not there (yet)."""


def _message(body: Any) -> str:
    if isinstance(body, dict) and body.get("message"):
        return f"({body['message']})"
    return ""


def _check_get(body: Any) -> str:
    if not isinstance(body, dict) or "experiment" not in body:
        return "response has no `experiment`"
    return ""


def _check_list(body: Any) -> str:
    if not isinstance(body, dict):
        return "response is not an object"
    got = len(body.get("experiments") or [])
    total = (body.get("pagination") or {}).get("total")
    if got != PAGE or total is None or int(total) < EXPERIMENTS:
        return f"page had {got} experiments, pagination.total={total}"
    return ""


def _load_worker(
    port: int, kind: str, target: dict[str, Any], start_at: float, duration_s: float
) -> dict[str, Any]:
    """One client process: ``kind`` requests back to back from ``start_at`` for ``duration_s``."""
    if kind == "ingest":
        headers = {"Grpc-Metadata-x-allocation-token": f"Bearer {target['token']}"}
        path = f"/api/v1/trials/{target['trial_id']}/metrics"
    else:
        headers, path = {}, "/info"
    client = HttpClient(port, headers)
    ok = errors = 0
    first_error = ""
    samples: list[float] = []
    step = 0
    time.sleep(max(0.0, start_at - time.time()))
    end = time.perf_counter() + duration_s
    while (now := time.perf_counter()) < end:
        body = None
        if kind == "ingest":
            step += 1
            body = json.dumps(
                {
                    "group": "training",
                    "metrics": {
                        "metrics": {
                            "avgMetrics": {"loss": 1.0 / step, "accuracy": 0.5, "lr": 0.01},
                            "batchMetrics": None,
                        },
                        "trialId": target["trial_id"],
                        "trialRunId": target["run_id"],
                        "stepsCompleted": step * 10,
                        "reportTime": None,
                    },
                }
            ).encode()
        status, raw = client.request("POST" if body else "GET", path, body)
        samples.append(time.perf_counter() - now)
        if status == 200:
            ok += 1
        else:
            errors += 1
            if not first_error:
                first_error = f"HTTP {status} {raw[:200].decode(errors='replace')}"
            if errors >= 20 and ok == 0:
                break
    client.close()
    return {"ok": ok, "errors": errors, "first_error": first_error, "samples": samples}


def _load(port: int, kind: str, targets: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
    """Run one ``_load_worker`` process per target, all starting together; sum their results."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(targets), mp_context=context) as pool:
        start_at = time.time() + 1.5  # every worker process is up and connected by then
        futures = [
            pool.submit(_load_worker, port, kind, target, start_at, duration_s)
            for target in targets
        ]
        results = [future.result(timeout=duration_s + 120) for future in futures]
    samples = [s for r in results for s in r["samples"]]
    return {
        "ok": sum(r["ok"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "first_error": next((r["first_error"] for r in results if r["first_error"]), ""),
        "duration_s": duration_s,
        "latency": latency_stats(samples),
    }


def _stored_reports(engine: Engine, trial_ids: list[int], expected: int) -> int:
    """Rows in ``metric_reports`` for the load trials (waits up to 5 s for a lagging writer)."""
    deadline = time.monotonic() + 5
    while True:
        with engine.connect() as conn:
            stored = int(
                conn.scalar(
                    select(func.count())
                    .select_from(MetricReport)
                    .where(MetricReport.trial_id.in_(trial_ids))
                )
                or 0
            )
        if stored >= expected or time.monotonic() > deadline:
            return stored
        time.sleep(0.2)


def _latency_measurement(
    name: str, port: int, token: str, paths: list[str], warmup: int, check: Callable[[Any], str]
) -> Measurement:
    target = f"p95 < {LATENCY_TARGET_MS:.0f} ms"
    try:
        samples, note = _latency(port, token, paths, warmup, check)
    except _UnavailableError as exc:
        return Measurement(name, None, "ms p95", target, None, note=str(exc))
    stats = latency_stats(samples)
    p95 = stats["p95_ms"]
    note = note or f"p50 {stats['p50_ms']:.2f} ms, p99 {stats['p99_ms']:.2f} ms, n={len(samples)}"
    return Measurement(name, p95, "ms p95", target, p95 < LATENCY_TARGET_MS, stats, note)


def run(options: Options) -> list[Measurement]:
    """Set up, measure, print and write the results; return the measurements."""
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    if home.exists():
        shutil.rmtree(home)
    settings = MasterSettings(home=home)
    engine = make_engine(settings.database_url)
    rng = random.Random(11)
    setup: dict[str, Any] = {"experiments": EXPERIMENTS, "database": "sqlite"}
    measurements: list[Measurement] = []
    try:
        migrate.upgrade(engine)
        with make_session_factory(engine)() as session:
            bootstrap(session, "")
        with running_master(home) as master:
            token = _login(master.port)
            started = time.perf_counter()
            ids = _seed(engine, _create_template(master.port, token), EXPERIMENTS)
            targets = _ingest_trials(engine, ids, options.clients)
            setup["seed_s"] = round(time.perf_counter() - started, 2)

            n_get, n_list = (300, 60) if options.quick else (2000, 300)
            floor = _latency(master.port, token, ["/api/v1/master"] * n_get, 20, lambda _: "")[0]
            stats = latency_stats(floor)
            measurements.append(
                Measurement(
                    "floor_get_master",
                    stats["p95_ms"],
                    "ms p95",
                    stats=stats,
                    note="GET /api/v1/master: auth + a small response, the least a GET costs",
                )
            )
            get_paths = [f"/api/v1/experiments/{rng.choice(ids)}" for _ in range(n_get)]
            measurements.append(
                _latency_measurement(
                    "get_experiment", master.port, token, get_paths, 20, _check_get
                )
            )
            pages = range(0, EXPERIMENTS, PAGE)
            list_paths = [
                f"/api/v1/experiments?limit={PAGE}&offset={rng.choice(pages)}"
                for _ in range(n_list)
            ]
            measurements.append(
                _latency_measurement(
                    "list_experiments_100", master.port, token, list_paths, 5, _check_list
                )
            )

            duration = 3.0 if options.quick else 10.0
            ingest = _load(master.port, "ingest", targets, duration)
            rate = ingest["ok"] / duration
            stored = _stored_reports(engine, [t["trial_id"] for t in targets], ingest["ok"])
            ingest["stored"] = stored
            target = f">= {INGEST_TARGET:,.0f}/s"
            if ingest["ok"] == 0:
                note = f"not available: {ingest['first_error']}"
                measurements.append(
                    Measurement("metric_ingest", None, "reports/s", target, None, ingest, note)
                )
            else:
                note = (
                    f"{options.clients} clients, p95 {ingest['latency']['p95_ms']:.1f} ms, "
                    f"{stored} stored, {ingest['errors']} errors"
                )
                measurements.append(
                    Measurement(
                        "metric_ingest",
                        rate,
                        "reports/s",
                        target,
                        rate >= INGEST_TARGET and ingest["errors"] == 0 and stored >= ingest["ok"],
                        ingest,
                        note,
                    )
                )

            ceiling = _load(master.port, "info", targets, duration)
            measurements.append(
                Measurement(
                    "http_ceiling_info",
                    ceiling["ok"] / duration,
                    "req/s",
                    note=f"GET /info, {options.clients} clients: this machine's HTTP ceiling",
                    stats=ceiling,
                )
            )
    finally:
        engine.dispose()
        if not options.keep and options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(NAME, measurements)
    path = write_results(NAME, options, measurements, {"setup": setup})
    print(f"\nraw results: {path}")
    return measurements
