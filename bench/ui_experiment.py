"""``ui_experiment``: the experiment page of a finished search of 100 trials x 10,000 training
points, opened cold in a real browser (issue 24) and its series requests (issue 25).

Setup: a fresh master home (SQLite; PostgreSQL with ``--db postgresql``); one experiment created
by the master's own service, marked COMPLETED, with ``trials`` trials bulk-inserted, each with
``points`` training reports (``loss``) and ``validations`` validation reports
(``validation_loss``, the searcher metric), with what the ingest keeps for them: validation
summaries, each trial's ``summaryMetrics`` and its stored series (rollups). Seeding a million
reports through HTTP takes minutes; bulk inserts take seconds.

Each run starts ``stalwart master`` afresh (its caches cold), opens a new browser context
(Debian's chromium under Playwright; empty HTTP cache) with the session token already in the
tab's storage, and times from navigating to ``#/experiments/{id}?group=training&metric=loss``
until every trial's line is in the chart's DOM twin (``#chart li.series``) holding the points the
master served (``data-drawn`` equal to ``data-points``): **curves drawn**. It then reloads the
page in the same context (browser and master caches warm) and times it again, and finally,
once no request is in flight (the trials list, asked beside the experiment, may answer after the
curves are drawn), counts the requests the idle page sends for ``idle_s`` seconds (an ended
experiment changes no more: about 0 a minute).

Measured per run, from the browser's view of each response: the series requests' server time
(``Server-Timing: app``) cold and warm, and the bytes the page transferred (response bodies as
sent, so compressed when the master compresses). Targets: curves drawn < 1 s cold (issue 24),
series requests < 500 ms cold (issue 25). The load average is printed and recorded.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, insert, select, text, update

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
from bench.experiment_list import _database, _login, _server_timing
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Experiment, MetricReport, Trial, TrialMetricSummary, User
from stalwart.master.services import series_store
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.metric_summaries import summarize_rows
from stalwart.master.settings import MasterSettings

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Response

__all__ = ["NAME", "Size", "measure", "run", "seed"]

NAME = "ui_experiment"
CHROMIUM = os.environ.get("STALWART_CHROMIUM", "/usr/bin/chromium")
DRAWN_TARGET_S = 1.0
SERIES_TARGET_MS = 500.0

CONFIG = """\
name: ui bench
entrypoint: python3 train.py
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1, base: 10}
searcher:
  name: random
  metric: validation_loss
  max_trials: 100
  max_length: {batches: 10000}
"""

_DRAWN = """(n) => {
  const lines = document.querySelectorAll('#chart li.series');
  if (lines.length !== n) return false;
  return [...lines].every((l) => Number(l.getAttribute('data-points')) > 0
    && l.getAttribute('data-drawn') === l.getAttribute('data-points'));
}"""
"""True once every trial's line holds what the master served (the chart's DOM twin)."""


@dataclass(frozen=True)
class Size:
    """How much to seed and measure."""

    trials: int = 100
    points: int = 10_000
    validations: int = 100
    runs: int = 3
    idle_s: float = 15.0


@dataclass
class Run:
    """What one cold open (and its warm reload) measured."""

    drawn_cold_s: float
    drawn_warm_s: float
    series_cold_ms: list[float] = field(default_factory=list)
    series_warm_ms: list[float] = field(default_factory=list)
    bytes_cold: int = 0
    bytes_warm: int = 0
    requests_cold: int = 0
    idle_requests_per_min: float = 0.0
    cold_trace: list[str] = field(default_factory=list)
    """The cold open's requests: when each started and ended (ms after the navigation began)
    and its server time, so a miss can be read off the results file."""


def seed(engine: Engine, settings: MasterSettings, size: Size) -> int:
    """Migrate, bootstrap and bulk-insert the experiment, its trials and reports; its id."""
    migrate.upgrade(engine)
    sessions = make_session_factory(engine)
    rng = random.Random(7)
    with sessions() as session:
        bootstrap(session, "")
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        exp = create_experiment(
            session, settings, admin, config_text=CONFIG, model_definition=[], activate=False
        ).experiment
        session.execute(
            update(Experiment)
            .where(Experiment.id == exp.id)
            .values(state="COMPLETED", checkpoints_collected=True, progress=1.0)
        )
        now = exp.start_time
        trials = [
            {
                "experiment_id": exp.id,
                "request_id": str(uuid.uuid4()),
                "task_id": f"{exp.id}.{i}",
                "state": "COMPLETED",
                "hparams": {"lr": 10 ** rng.uniform(-4, -1)},
                "seed": rng.randint(0, 2**31),
                "total_batches": size.points,
            }
            for i in range(size.trials)
        ]
        session.execute(insert(Trial), trials)
        ids = list(
            session.scalars(
                select(Trial.id).where(Trial.experiment_id == exp.id).order_by(Trial.id)
            )
        )
        validations: list[dict[str, Any]] = []
        for n, trial_id in enumerate(ids):
            floor = 0.2 + (n % 10) * 0.05
            rows = [
                {
                    "trial_id": trial_id,
                    "trial_run_id": 1,
                    "group": "training",
                    "steps_completed": step,
                    "report_time": now,
                    "metrics": {"loss": floor + 500 / (500 + step) + rng.uniform(0, 0.02)},
                    "archived": False,
                }
                for step in range(1, size.points + 1)
            ]
            every = max(1, size.points // max(1, size.validations))
            for step in range(every, size.points + 1, every):
                validations.append(
                    {
                        "trial_id": trial_id,
                        "trial_run_id": 1,
                        "group": "validation",
                        "steps_completed": step,
                        "report_time": now,
                        "metrics": {"validation_loss": floor + 600 / (600 + step)},
                        "archived": False,
                    }
                )
            for chunk in range(0, len(rows), 5000):
                session.execute(insert(MetricReport), rows[chunk : chunk + 5000])
        for chunk in range(0, len(validations), 5000):
            session.execute(insert(MetricReport), validations[chunk : chunk + 5000])
        summaries = summarize_rows(
            (r["trial_id"], r["steps_completed"], r["metrics"]) for r in validations
        )
        for chunk in range(0, len(summaries), 5000):
            session.execute(insert(TrialMetricSummary), summaries[chunk : chunk + 5000])
        series_store.rebuild(session, ids)  # summaries and rollups, as the ingest keeps them
        session.commit()
        experiment_id = int(exp.id)
    if engine.dialect.name == "postgresql":  # statistics, as autovacuum keeps them on a live one
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    return experiment_id


def _open(browser: Browser, port: int, token: str, experiment_id: int, size: Size) -> Run:
    """One cold open, a warm reload and the idle phase (see the module docstring)."""
    url = f"http://127.0.0.1:{port}"
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(
        f"sessionStorage.setItem('stalwart.token', {token!r});"
        "sessionStorage.setItem('stalwart.user', 'admin');"
    )
    responses: list[Response] = []
    context.on("response", lambda r: responses.append(r))
    page = context.new_page()
    try:

        def load(go: Any) -> tuple[float, list[Response]]:
            responses.clear()
            started = time.perf_counter()
            go()
            page.wait_for_function(_DRAWN, arg=size.trials, timeout=120_000, polling="raf")
            took = time.perf_counter() - started
            return took, list(responses)

        cold_s, cold = load(
            lambda: page.goto(f"{url}/#/experiments/{experiment_id}?group=training&metric=loss")
        )
        warm_s, warm = load(lambda: page.reload())
        result = Run(drawn_cold_s=cold_s, drawn_warm_s=warm_s)
        result.series_cold_ms = _series_ms(cold)
        result.series_warm_ms = _series_ms(warm)
        result.bytes_cold = _bytes(cold)
        result.bytes_warm = _bytes(warm)
        result.requests_cold = len(cold)
        result.cold_trace = _trace(cold)
        # The page draws its curves before the trials list answers (it asks for both at once):
        # the idle phase starts once nothing is in flight, so it counts polls only.
        page.wait_for_load_state("networkidle", timeout=120_000)
        responses.clear()
        idle_started = time.perf_counter()
        page.wait_for_timeout(size.idle_s * 1000)
        idle = [r for r in responses if "/api/" in r.url]
        result.idle_requests_per_min = len(idle) * 60 / (time.perf_counter() - idle_started)
        return result
    finally:
        context.close()


def _series_ms(responses: list[Response]) -> list[float]:
    out = []
    for r in responses:
        if "/series" in r.url:
            took = _server_timing({k.lower(): v for k, v in r.all_headers().items()}, "app")
            if took is not None:
                out.append(took * 1000)
    return out


def _trace(responses: list[Response]) -> list[str]:
    """``start-end ms  server ms  path`` of each response, in the order they started."""
    if not responses:
        return []
    origin = min(r.request.timing["startTime"] for r in responses)
    lines = []
    for r in sorted(responses, key=lambda r: r.request.timing["startTime"]):
        timing = r.request.timing
        start = timing["startTime"] - origin
        end = start + max(0.0, timing["responseEnd"])
        app = _server_timing({k.lower(): v for k, v in r.all_headers().items()}, "app")
        server = f"{app * 1000:7.0f}" if app is not None else "      -"
        path = r.url.split("://", 1)[-1].split("/", 1)[-1]
        lines.append(f"{start:7.0f}-{end:7.0f} ms  server {server} ms  /{path[:90]}")
    return lines


def _bytes(responses: list[Response]) -> int:
    total = 0
    for r in responses:
        try:
            sizes = r.request.sizes()
        except Exception:  # a response whose body was never read (a redirect)
            continue
        total += int(sizes["responseBodySize"]) + int(sizes["responseHeadersSize"])
    return total


def measure(home: Path, db_args: list[str], experiment_id: int, size: Size) -> list[Run]:
    """``size.runs`` cold opens, each against a freshly started master on ``home``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        raise BenchError("the playwright package is not installed") from err
    if not Path(CHROMIUM).exists():
        raise BenchError(f"{CHROMIUM} is not installed")
    runs = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            for _ in range(size.runs):
                with running_master(home, extra_args=db_args) as master:
                    client = HttpClient(master.port)
                    token = _login(client)
                    client.close()
                    runs.append(_open(browser, master.port, token, experiment_id, size))
        finally:
            browser.close()
    return runs


def summarize(runs: list[Run], database: str) -> list[Measurement]:
    """The table's rows from the runs on one database."""
    cold = latency_stats([r.drawn_cold_s for r in runs])
    warm = latency_stats([r.drawn_warm_s for r in runs])
    s_cold = latency_stats([ms / 1000 for r in runs for ms in r.series_cold_ms])
    s_warm = latency_stats([ms / 1000 for r in runs for ms in r.series_warm_ms])
    worst = cold.get("max_ms")
    worst_series = s_cold.get("max_ms")
    kb_cold = sum(r.bytes_cold for r in runs) / len(runs) / 1024
    kb_warm = sum(r.bytes_warm for r in runs) / len(runs) / 1024
    idle = max(r.idle_requests_per_min for r in runs)
    return [
        Measurement(
            name=f"curves_drawn_cold[{database}]",
            value=worst,
            unit="ms max",
            target=f"< {DRAWN_TARGET_S * 1000:.0f} ms",
            passed=None if worst is None else worst < DRAWN_TARGET_S * 1000,
            stats={
                "runs_s": [r.drawn_cold_s for r in runs],
                **cold,
                "traces": [r.cold_trace for r in runs],
            },
            note=f"{len(runs)} runs, p50 {cold.get('p50_ms', 0):.0f} ms; "
            f"{kb_cold:.0f} KiB in {runs[0].requests_cold} requests",
        ),
        Measurement(
            name=f"curves_drawn_warm[{database}]",
            value=warm.get("max_ms"),
            unit="ms max",
            stats={"runs_s": [r.drawn_warm_s for r in runs], **warm},
            note=f"reload, p50 {warm.get('p50_ms', 0):.0f} ms; {kb_warm:.0f} KiB",
        ),
        Measurement(
            name=f"series_server_cold[{database}]",
            value=worst_series,
            unit="ms max",
            target=f"< {SERIES_TARGET_MS:.0f} ms",
            passed=None if worst_series is None else worst_series < SERIES_TARGET_MS,
            stats=s_cold,
            note=f"Server-Timing app, {s_cold.get('count', 0)} requests",
        ),
        Measurement(
            name=f"series_server_warm[{database}]",
            value=s_warm.get("max_ms"),
            unit="ms max",
            stats=s_warm,
            note=f"p50 {s_warm.get('p50_ms', 0):.0f} ms",
        ),
        Measurement(
            name=f"idle_requests[{database}]",
            value=idle,
            unit="per min",
            target="~0",
            passed=idle < 1.0,
            note="API requests of the open page after the experiment ended",
        ),
    ]


def measure_database(kind: str, workdir: Path, size: Size) -> list[Measurement]:
    """Seed one database (``sqlite`` or ``postgresql``) and measure the page against it."""
    home = workdir / f"home-{kind}"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    with _database(kind, home) as url:
        settings = MasterSettings(home=home, db=url)
        engine = make_engine(settings.database_url)
        started = time.monotonic()
        try:
            experiment_id = seed(engine, settings, size)
        finally:
            engine.dispose()
        print(
            f"{NAME}[{kind}]: seeded {size.trials} x {size.points} points in "
            f"{time.monotonic() - started:.1f} s"
        )
        return summarize(measure(home, ["--db", url], experiment_id, size), kind)


def run(options: Options, size: Size | None = None) -> list[Measurement]:
    """Seed and measure on each database of ``options.databases``; print and record."""
    size = size or (Size(runs=2, idle_s=6.0) if options.quick else Size())
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-ui-"))
    load_before = os.getloadavg()
    print(
        f"{NAME}: load average before "
        f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
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
            "trials": size.trials,
            "points_per_trial": size.points,
            "validations_per_trial": size.validations,
            "runs": size.runs,
        },
    )
    print(f"results: {path}")
    return measurements
