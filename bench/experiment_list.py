"""``experiment_list``: the experiment table's server side with 10,000 experiments, on SQLite
and PostgreSQL, through a real ``stalwart master`` on loopback.

Setup per database: a fresh schema; one experiment created by the master's own service (so its
row is what the master stores), cloned with bulk inserts to ``EXPERIMENTS`` finished
experiments, each with ``TRIALS`` trials (hyperparameters ``lr`` (float), ``layers`` (int),
``optimizer`` (text)) and ``VALIDATIONS`` validation reports per trial (``validation_loss``,
``accuracy``); one experiment in ten has no validation yet (its metric columns are NULL). The
trials' and experiments' best searcher metric and the trials' validation summaries are written
as the ingest writes them.

Measurements (sequential requests on one keep-alive connection, random pages of ``PAGE``): the
server's time, from the master's ``Server-Timing`` header (receiving the request to starting
the answer); beside it, the CPU time the master's process spent (its ``cpu`` timing: what the
request costs whatever else the machine runs; on SQLite it includes the database) and the
round trip on loopback (which adds the transfer and this client's decoding):

- ``sort_searcher_metric``: ``GET /api/v1/experiments?sortBy=SORT_BY_SEARCHER_METRIC_VAL``
  (Determined's wire, what ``det`` and the UI's list send).
- ``sort_hyperparameter``: ``POST /api/v1/experiments-search`` sorted ``hp.lr=desc``.
- ``sort_validation_metric``: the same, sorted ``validation.accuracy.max=desc``.
- ``filter_and_sort``: the same, filtered (``hp.optimizer = adam`` and
  ``validation.validation_loss.min < 0.5``) and sorted ``validation.validation_loss.last=asc``.

Target: p95 < 300 ms each. The load average is printed and recorded with the results.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, bindparam, func, insert, select, text, update

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
from bench.load import pg_schema
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Experiment, MetricReport, Trial, TrialMetricSummary, User
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.metric_summaries import summarize_rows
from stalwart.master.settings import MasterSettings

__all__ = ["NAME", "Size", "measure", "run"]

NAME = "experiment_list"
EXPERIMENTS = 10_000
TRIALS = 3
VALIDATIONS = 4
PAGE = 100
TARGET_MS = 300.0

CONFIG = """\
name: list bench
entrypoint: python3 train.py
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1, base: 10}
  layers: {type: int, minval: 1, maxval: 8}
  optimizer: {type: categorical, vals: [adam, sgd]}
searcher:
  name: random
  metric: validation_loss
  max_trials: 3
  max_length: {batches: 1000}
"""
_FILTER = {
    "filterGroup": {
        "kind": "group",
        "conjunction": "and",
        "children": [
            {"kind": "field", "columnName": "hp.optimizer", "operator": "=", "value": "adam"},
            {
                "kind": "field",
                "columnName": "validation.validation_loss.min",
                "operator": "<",
                "value": 0.5,
            },
        ],
    },
    "showArchived": False,
}


@dataclass(frozen=True)
class Size:
    """How much to seed and measure."""

    experiments: int = EXPERIMENTS
    requests: int = 60
    warmup: int = 5


def seed(engine: Engine, settings: MasterSettings, size: Size) -> None:
    """Migrate, bootstrap and bulk-insert the experiments, trials and validation reports."""
    migrate.upgrade(engine)
    sessions = make_session_factory(engine)
    rng = random.Random(11)
    with sessions() as session:
        bootstrap(session, "")
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        created = create_experiment(
            session, settings, admin, config_text=CONFIG, model_definition=[], activate=False
        ).experiment
        base = {
            attr.key: getattr(created, attr.key)
            for attr in Experiment.__mapper__.column_attrs
            if attr.key not in ("id", "model_definition", "searcher_state")
        }
        session.execute(update(Experiment).values(state="COMPLETED", checkpoints_collected=True))
        rows = []
        for i in range(1, size.experiments):
            start = created.start_time - timedelta(minutes=size.experiments - i)
            rows.append(
                {
                    **base,
                    "name": f"list bench {i}",
                    "job_id": str(uuid.uuid4()),
                    "state": ("COMPLETED", "CANCELED", "ERROR")[i % 3],
                    "start_time": start,
                    "end_time": start + timedelta(minutes=rng.randint(1, 90)),
                    "progress": 1.0,
                    "checkpoints_collected": True,  # else the master collects 10,000 at start
                }
            )
        for chunk in range(0, len(rows), 2000):
            session.execute(insert(Experiment), rows[chunk : chunk + 2000])
        ids = list(session.scalars(select(Experiment.id).order_by(Experiment.id)))
        next_trial = (session.scalar(select(func.max(Trial.id))) or 0) + 1
        trials: list[dict[str, Any]] = []
        reports: list[dict[str, Any]] = []
        bests: list[dict[str, Any]] = []
        now = created.start_time
        for exp_id in ids:
            validated = exp_id % 10 != 0
            best: tuple[float, int] | None = None
            for _ in range(TRIALS):
                trial_id = next_trial
                next_trial += 1
                losses = [rng.uniform(0.05, 2.0) for _ in range(VALIDATIONS)] if validated else []
                trials.append(
                    {
                        "id": trial_id,
                        "experiment_id": exp_id,
                        "request_id": str(uuid.uuid4()),
                        "task_id": f"{exp_id}.{trial_id}",
                        "state": "COMPLETED",
                        "hparams": {
                            "lr": 10 ** rng.uniform(-4, -1),
                            "layers": rng.randint(1, 8),
                            "optimizer": rng.choice(["adam", "sgd"]),
                        },
                        "seed": rng.randint(0, 2**31),
                        "total_batches": 1000,
                        "searcher_metric_value": min(losses) if losses else None,
                    }
                )
                for step, loss in enumerate(losses, start=1):
                    reports.append(
                        {
                            "trial_id": trial_id,
                            "trial_run_id": 1,
                            "group": "validation",
                            "steps_completed": step * 250,
                            "report_time": now,
                            "metrics": {"validation_loss": loss, "accuracy": 1.0 - loss / 2},
                            "archived": False,
                        }
                    )
                if losses and (best is None or min(losses) < best[0]):
                    best = (min(losses), trial_id)
            if best is not None:
                bests.append({"eid": exp_id, "trial": best[1], "value": best[0]})
        for chunk in range(0, len(trials), 5000):
            session.execute(insert(Trial), trials[chunk : chunk + 5000])
        for chunk in range(0, len(reports), 5000):
            session.execute(insert(MetricReport), reports[chunk : chunk + 5000])
        summaries = summarize_rows(
            (r["trial_id"], r["steps_completed"], r["metrics"]) for r in reports
        )  # what the ingest keeps
        for chunk in range(0, len(summaries), 5000):
            session.execute(insert(TrialMetricSummary), summaries[chunk : chunk + 5000])
        table = Experiment.metadata.tables[Experiment.__tablename__]
        stmt = (
            update(table)
            .where(table.c.id == bindparam("eid"))
            .values(best_trial_id=bindparam("trial"), best_searcher_metric=bindparam("value"))
        )
        session.connection().execute(stmt, bests)
        session.commit()
    if engine.dialect.name == "postgresql":  # statistics, as autovacuum keeps them on a live one
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))


def _login(client: HttpClient) -> str:
    status, body = client.json(
        "POST", "/api/v1/auth/login", {"username": "admin", "password": "", "isHashed": True}
    )
    if status != 200 or not isinstance(body, dict):
        raise BenchError(f"login failed: HTTP {status} {body}")
    return str(body["token"])


def _requests(size: Size, rng: random.Random) -> dict[str, list[tuple[str, str, Any]]]:
    pages = max(1, size.experiments // PAGE)

    def offset() -> int:
        return rng.randrange(pages) * PAGE

    def search(sort: str, flt: Any = None) -> tuple[str, str, Any]:
        body: dict[str, Any] = {"sort": sort, "offset": offset(), "limit": PAGE}
        if flt is not None:  # about 40% pass the filter: pages of the first quarter
            body["filter"] = json.dumps(flt)
            body["offset"] = rng.randrange(max(1, pages // 4)) * PAGE
        return "POST", "/api/v1/experiments-search", body

    n = size.requests + size.warmup
    return {
        "sort_searcher_metric": [
            (
                "GET",
                "/api/v1/experiments?sortBy=SORT_BY_SEARCHER_METRIC_VAL&orderBy=ORDER_BY_ASC"
                f"&limit={PAGE}&offset={offset()}",
                None,
            )
            for _ in range(n)
        ],
        "sort_hyperparameter": [search("hp.lr=desc") for _ in range(n)],
        "sort_validation_metric": [search("validation.accuracy.max=desc") for _ in range(n)],
        "filter_and_sort": [
            search("validation.validation_loss.last=asc", _FILTER) for _ in range(n)
        ],
    }


def _server_timing(headers: dict[str, str], name: str) -> float | None:
    """Seconds of one metric of the master's ``Server-Timing`` (``app`` or ``cpu``)."""
    for metric in headers.get("server-timing", "").split(","):
        label, _, params = metric.strip().partition(";")
        if label == name and params.strip().startswith("dur="):
            return float(params.strip()[4:]) / 1000
    return None


def measure(port: int, size: Size, database: str) -> list[Measurement]:
    """Time the list requests against a master on ``port`` (see the module docstring)."""
    client = HttpClient(port)
    token = _login(client)
    client.close()
    client = HttpClient(port, {"Authorization": f"Bearer {token}"})
    out = []
    try:
        for name, calls in _requests(size, random.Random(5)).items():
            server, cpu, round_trip = [], [], []
            for i, (method, path, body) in enumerate(calls):
                payload = None if body is None else json.dumps(body).encode()
                started = time.perf_counter()
                status, headers, raw = client.exchange(method, path, payload)
                elapsed = time.perf_counter() - started
                answer = json.loads(raw) if raw else None
                if status != 200 or not isinstance(answer, dict):
                    raise BenchError(f"{method} {path}: HTTP {status} {raw[:300]!r}")
                if not answer.get("experiments"):
                    raise BenchError(f"{method} {path}: an empty page")
                if i >= size.warmup:
                    server.append(_server_timing(headers, "app") or elapsed)
                    cpu.append(_server_timing(headers, "cpu") or 0.0)
                    round_trip.append(elapsed)
            stats = latency_stats(server)
            trip = latency_stats(round_trip)
            spent = latency_stats(cpu)
            p95 = stats.get("p95_ms")
            out.append(
                Measurement(
                    name=f"{name}[{database}]",
                    value=p95,
                    unit="ms p95",
                    target=f"< {TARGET_MS:.0f} ms",
                    passed=None if p95 is None else p95 < TARGET_MS,
                    stats={**stats, "round_trip": trip, "master_cpu": spent},
                    note=f"p50 {stats.get('p50_ms', 0):.0f} ms; master CPU p50 "
                    f"{spent.get('p50_ms', 0):.0f} p95 {spent.get('p95_ms', 0):.0f} ms; "
                    f"round trip p95 {trip.get('p95_ms', 0):.0f} ms",
                )
            )
    finally:
        client.close()
    return out


@contextmanager
def _database(kind: str, home: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{home / 'master.db'}"
        return
    with pg_schema() as url:
        yield url


def measure_database(kind: str, workdir: Path, size: Size) -> list[Measurement]:
    """Seed one database (``sqlite`` or ``postgresql``) and measure a master on it."""
    home = workdir / f"home-{kind}"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    with _database(kind, home) as url:
        settings = MasterSettings(home=home, db=url)
        engine = make_engine(settings.database_url)
        started = time.monotonic()
        try:
            seed(engine, settings, size)
        finally:
            engine.dispose()
        print(
            f"{NAME}[{kind}]: seeded {size.experiments} experiments in "
            f"{time.monotonic() - started:.1f} s"
        )
        with running_master(home, extra_args=["--db", url]) as master:
            return measure(master.port, size, kind)


def run(options: Options) -> list[Measurement]:
    """Seed and measure on each database of ``options.databases``; print and record."""
    size = Size(requests=20 if options.quick else 60)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-list-"))
    load_before = os.getloadavg()
    print(
        f"{NAME}: load average before {load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f}"
    )
    measurements: list[Measurement] = []
    try:
        for kind in options.databases:
            measurements += measure_database(kind, workdir, size)
    finally:
        if not options.keep and options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"{NAME}: load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print_table(NAME, measurements)
    path = write_results(
        NAME,
        options,
        measurements,
        {
            "load_average_before": load_before,
            "load_average_after": load_after,
            "experiments": size.experiments,
            "trials_per_experiment": TRIALS,
            "validations_per_trial": VALIDATIONS,
        },
    )
    print(f"results: {path}")
    return measurements
