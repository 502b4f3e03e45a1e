"""``b3``: REST API latency under load from 25 and 100 users of the CLI and UI (issues 10, 25).

Setup: a fresh master home (SQLite, WAL); one experiment created through
``POST /api/v1/experiments`` and cloned with SQLAlchemy into **100 experiments of 80 trials
(8,000 trials)**; one trial of the last experiment gets **1,800 training reports** (10 metrics
each, ``loss`` among them) and 18 validations. ``stalwart master`` serves it in a subprocess.

Load: locust (in the peers' virtual environment, ``bench/peers/locustfile.py``), 25 and 100
users (``--users``) started at once, against a master of 1 and of 2 worker processes
(``--workers``), for 5 minutes each (30 s with ``--quick``); each user signs in with a token
made beforehand (a password login, hashed, is timed alone: the "login" row), then keeps picking a
read request the CLI or the UI makes (experiment list pages, an experiment and its trials,
checkpoints, the experiment and trial charts, the 1,800-report trial's series and full metric
stream, cluster pages) with 0.5-1.5 s between requests.

Targets: p95 under 100 ms over all requests with 25 users and under 250 ms with 100, and no
failed request. The table shows every
endpoint's count, p50, p95, p99 and failures (locust's own statistics), and first its "alone"
p50: the same request sent by one client with nothing else running (5 each, 20 without
``--quick``), i.e. the endpoint's own service time, so that queueing under load shows apart.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, insert, select

from bench.b1 import PEERS_VENV, ensure_peers_venv
from bench.common import (
    BenchError,
    HttpClient,
    Measurement,
    Options,
    latency_stats,
    running_master,
    write_results,
)
from bench.master_api import TERMINAL, _create_template, _login
from bench.sidebyside import format_table
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Experiment, MetricReport, Task, Trial
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.settings import MasterSettings

__all__ = ["NAME", "endpoint_paths", "parse_locust_stats", "run"]

NAME = "b3"
EXPERIMENTS = 100
TRIALS_PER_EXPERIMENT = 80
BIG_REPORTS = 1800
USERS = 25
DURATION_S = 300
QUICK_DURATION_S = 30
P95_TARGETS_MS = {25: 100.0, 100: 250.0}
"""The p95 targets over all requests, by number of users."""
LOCUSTFILE = Path(__file__).resolve().parent / "peers" / "locustfile.py"
STATES = ("COMPLETED", "COMPLETED", "COMPLETED", "ACTIVE", "PAUSED", "CANCELED", "ERROR")


def _seed(engine: Engine, template_id: int) -> dict[str, Any]:
    """Clone the template to EXPERIMENTS experiments x TRIALS_PER_EXPERIMENT trials; one big trial.

    Returns the ids the load uses (``experiments``, ``trials``, ``big_trial``, ``big_experiment``).
    """
    rng = random.Random(7)
    with make_session_factory(engine)() as session:
        template = session.get(Experiment, template_id)
        if template is None:
            raise BenchError(f"experiment {template_id} is not in the database")
        base = {
            a.key: getattr(template, a.key)
            for a in Experiment.__mapper__.column_attrs
            if a.key != "id"
        }
        rows = []
        for i in range(1, EXPERIMENTS):
            state = STATES[i % len(STATES)]
            start = template.start_time - timedelta(minutes=EXPERIMENTS - i)
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
        session.execute(insert(Experiment), rows)
        ids = list(session.scalars(select(Experiment.id).order_by(Experiment.id)))
        next_trial = (session.scalar(select(func.max(Trial.id))) or 0) + 1
        trials: list[dict[str, Any]] = []
        tasks: list[dict[str, Any]] = []
        for exp_id in ids:
            for _ in range(TRIALS_PER_EXPERIMENT):
                request = str(uuid.uuid4())
                task_id = f"{exp_id}.{request}"
                trial_id = next_trial + len(trials)
                trials.append(
                    {
                        "id": trial_id,
                        "experiment_id": exp_id,
                        "request_id": request,
                        "task_id": task_id,
                        "state": "COMPLETED",
                        "hparams": {"lr": rng.random() / 10, "layers": rng.randint(1, 8)},
                        "seed": rng.randint(0, 2**31),
                        "total_batches": BIG_REPORTS,
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
        big_trial = trials[-1]["id"]
        now = dt.datetime.now(dt.UTC)
        reports = [
            {
                "trial_id": big_trial,
                "trial_run_id": 0,
                "group": "training",
                "steps_completed": step,
                "report_time": now,
                "metrics": {"loss": 1.0 / step, **{f"m{i}": step * 0.001 + i for i in range(9)}},
                "batch_metrics": None,
                "archived": False,
            }
            for step in range(1, BIG_REPORTS + 1)
        ]
        reports += [
            {
                "trial_id": big_trial,
                "trial_run_id": 0,
                "group": "validation",
                "steps_completed": step,
                "report_time": now,
                "metrics": {"validation_loss": 1.0 / step},
                "batch_metrics": None,
                "archived": False,
            }
            for step in range(100, BIG_REPORTS + 1, 100)
        ]
        session.execute(insert(MetricReport), reports)
        session.commit()
    return {
        "experiments": ids,
        "trials": [t["id"] for t in trials],
        "big_trial": big_trial,
        "big_experiment": ids[-1],
    }


def endpoint_paths(targets: dict[str, Any]) -> list[tuple[str, str]]:
    """``(locust name, path)`` of every request the locustfile makes, with sample ids."""
    exp, trial = targets["experiments"][0], targets["trials"][0]
    big_exp, big = targets["big_experiment"], targets["big_trial"]
    return [
        ("/agents", "/api/v1/agents"),
        ("/experiments/{id}", f"/api/v1/experiments/{exp}"),
        (
            "/experiments/{id}/checkpoints",
            f"/api/v1/experiments/{exp}/checkpoints"
            "?sortByAttr=SORT_BY_END_TIME&orderBy=ORDER_BY_DESC&limit=100",
        ),
        ("/experiments/{id}/trials", f"/api/v1/experiments/{exp}/trials?limit=1000"),
        (
            "/experiments?limit=20",
            "/api/v1/experiments?limit=20&offset=40&sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC",
        ),
        ("/master", "/api/v1/master"),
        ("/resource-pools", "/api/v1/resource-pools"),
        ("/tasks", "/api/v1/tasks"),
        (
            "/trials/metrics/trial_metrics (1,800 reports)",
            f"/api/v1/trials/metrics/trial_metrics?trialIds={big}&group=training",
        ),
        ("/trials/{id}", f"/api/v1/trials/{trial}"),
        (
            "/trials/{id}/checkpoints",
            f"/api/v1/trials/{trial}/checkpoints"
            "?sortByAttr=SORT_BY_BATCH_NUMBER&orderBy=ORDER_BY_DESC&limit=100",
        ),
        (
            "/trials/{id}/metrics/series",
            f"/api/v1/trials/{big}/metrics/series?metric=loss&group=training&maxPoints=1000",
        ),
        ("/ui/experiments/{id}/metric-names", f"/api/v1/ui/experiments/{big_exp}/metric-names"),
        (
            "/ui/experiments/{id}/series",
            f"/api/v1/ui/experiments/{big_exp}/series?metric=validation_loss&group=validation",
        ),
        ("/ui/trials/{id}/metric-names", f"/api/v1/ui/trials/{big}/metric-names"),
    ]


def _alone(port: int, token: str, targets: dict[str, Any], repeat: int) -> dict[str, float]:
    """p50 ms of each endpoint with one client and no other load: its own service time."""
    client = HttpClient(port, {"Authorization": f"Bearer {token}"})
    out = {}
    try:
        for name, path in endpoint_paths(targets):
            samples = []
            for _ in range(repeat):
                started = time.perf_counter()
                status, body = client.request("GET", path)
                samples.append(time.perf_counter() - started)
                if status != 200:
                    raise BenchError(f"GET {path} answered HTTP {status}: {body[:300]!r}")
            out[name] = latency_stats(samples)["p50_ms"]
    finally:
        client.close()
    return out


def _login_p50(port: int, repeat: int) -> float:
    """p50 ms of a password login alone (the password is hashed and checked each time)."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        _login(port)
        samples.append(time.perf_counter() - started)
    return float(latency_stats(samples)["p50_ms"])


def parse_locust_stats(path: Path) -> list[dict[str, Any]]:
    """Rows of locust's ``<prefix>_stats.csv``: name, count, failures, p50/p95/p99 ms, rps.

    The ``Aggregated`` row comes last, named ``all requests``.
    """
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            name = row["Name"] if row["Name"] != "Aggregated" else "all requests"
            if not row.get("Type") and name != "all requests":
                continue

            def number(key: str, row: dict[str, str] = row) -> float | None:
                value = row.get(key, "")
                return None if value in ("", "N/A") else float(value)

            rows.append(
                {
                    "name": name,
                    "count": int(row["Request Count"]),
                    "failures": int(row["Failure Count"]),
                    "p50_ms": number("50%"),
                    "p95_ms": number("95%"),
                    "p99_ms": number("99%"),
                    "max_ms": number("Max Response Time"),
                    "rps": number("Requests/s"),
                }
            )
    return rows


def _locust(
    port: int, targets: Path, work: Path, duration: int, users: int
) -> list[dict[str, Any]]:
    ensure_peers_venv()
    locust = PEERS_VENV / "bin" / "locust"
    prefix = work / f"locust-{users}-{port}"
    cmd = [str(locust), "-f", str(LOCUSTFILE), "--headless", "-u", str(users), "-r", str(users)]
    cmd += ["-t", f"{duration}s", "--host", f"http://127.0.0.1:{port}", "--csv", str(prefix)]
    cmd += ["--only-summary", "--loglevel", "WARNING"]
    env = {**os.environ, "B3_TARGETS": str(targets)}
    log_path = work / f"{prefix.name}.log"
    with log_path.open("wb") as log:
        subprocess.run(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=duration + 180,
            check=False,
        )
    stats = prefix.parent / f"{prefix.name}_stats.csv"
    if not stats.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise BenchError(f"locust wrote no statistics:\n{tail}")
    return parse_locust_stats(stats)


def _ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def run(options: Options) -> list[Measurement]:
    """Seed, serve, load with locust for each number of workers and users; print the
    per-endpoint tables and write JSON."""
    duration = QUICK_DURATION_S if options.quick else DURATION_S
    users_runs = options.users or (USERS, 100)
    workers_runs = options.workers or (1, 2)
    work = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-b3-"))
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    if home.exists():
        shutil.rmtree(home)
    engine = make_engine(MasterSettings(home=home).database_url)
    load_before = list(os.getloadavg())
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {}
    try:
        migrate.upgrade(engine)
        with make_session_factory(engine)() as session:
            bootstrap(session, "")
        with running_master(home) as master:
            template = _create_template(master.port, _login(master.port))
            targets = _seed(engine, template)
            targets_path = work / "targets.json"
            targets_path.write_text(json.dumps(targets), encoding="utf-8")
            alone = _alone(master.port, _login(master.port), targets, 5 if options.quick else 20)
            alone["login"] = _login_p50(master.port, 5 if options.quick else 20)
            # Each user signs in with a token made here: password hashing (a login's cost,
            # the "login" row of "alone") stays out of the load's figures.
            targets["tokens"] = [_login(master.port) for _ in range(max(users_runs))]
            targets_path.write_text(json.dumps(targets), encoding="utf-8")
        for workers in workers_runs:
            with running_master(home, extra_args=["--workers", str(workers)]) as master:
                for users in users_runs:
                    print(
                        f"{NAME}: {users} users for {duration} s, {workers} worker(s) ...",
                        flush=True,
                    )
                    runs[(workers, users)] = _locust(
                        master.port, targets_path, work, duration, users
                    )
    finally:
        engine.dispose()
        if options.workdir is None and not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    load_after = list(os.getloadavg())
    measurements = [Measurement("login_alone_p50", alone["login"], "ms", note="password hashed")]
    for (workers, users), rows in runs.items():
        _print_table(rows, alone, users, workers, duration)
        measurements += _measurements(rows, users, workers)
    print(f"{NAME}: a password login alone: p50 {_ms(alone['login'])} ms")
    setup = {
        "experiments": EXPERIMENTS,
        "trials": EXPERIMENTS * TRIALS_PER_EXPERIMENT,
        "big_trial_reports": BIG_REPORTS,
        "users": list(users_runs),
        "workers": list(workers_runs),
        "duration_s": duration,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "alone_p50_ms": alone,
    }
    path = write_results(NAME, options, measurements, {"setup": setup})
    print(f"raw results: {path}")
    return measurements


def _print_table(
    rows: list[dict[str, Any]], alone: dict[str, float], users: int, workers: int, duration: int
) -> None:
    table_rows = [
        (
            r["name"],
            _ms(alone.get(r["name"])) if r["name"] in alone else "-",
            str(r["count"]),
            _ms(r["p50_ms"]),
            _ms(r["p95_ms"]),
            _ms(r["p99_ms"]),
            str(r["failures"]),
        )
        for r in rows
    ]
    header = ("endpoint", "alone p50 ms", "requests", "p50 ms", "p95 ms", "p99 ms", "failures")
    title = (
        f"{NAME}: {users} users, {workers} master worker(s), {duration} s, "
        "100 experiments / 8,000 trials (SQLite)"
    )
    print("\n" + format_table(title, header, table_rows))


def _measurements(rows: list[dict[str, Any]], users: int, workers: int) -> list[Measurement]:
    """The p95 over all requests against its target for ``users``, the failures, and each
    endpoint's p95, named with the users and workers of the run."""
    run = f"{users}u_{workers}w"
    target = P95_TARGETS_MS.get(users)
    total = rows[-1]
    p95 = total["p95_ms"]
    out = [
        Measurement(
            f"p95_all_requests_{run}",
            p95,
            "ms",
            None if target is None else f"< {target:g} ms",
            None if target is None else p95 is not None and p95 < target,
            total,
            f"{total['count']:,} requests, {total['rps'] or 0:.1f}/s",
        ),
        Measurement(
            f"failed_requests_{run}",
            float(total["failures"]),
            "requests",
            "0",
            total["failures"] == 0,
        ),
    ]
    for r in rows[:-1]:
        out.append(
            Measurement(
                f"p95 {r['name']} {run}", r["p95_ms"], "ms", stats=r, note=f"{r['count']} req"
            )
        )
    return out
