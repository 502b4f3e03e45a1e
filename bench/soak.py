"""The chaos soak: a search keeps its promises while the master, agents and database connections
are killed over and over.

``python -m bench run soak`` (20 minutes, on SQLite and on PostgreSQL) or ``--quick`` (about 2
minutes each; ``tests/reliability/test_soak.py`` runs the quick plan in ``make test``).

Setup: a master (:class:`~stalwart.local.LocalCluster`, real processes) on SQLite or on a private
PostgreSQL schema, a few agents, and an adaptive_asha search whose trials
(``bench/trials/soak_train.py``) report a training metric every step, validate and checkpoint
every ``period`` steps, and journal what they did. While the search runs, a driver (seeded, so a
run can be repeated) SIGKILLs the master every ``master_kill_s`` seconds and starts it again,
SIGKILLs an agent every ``agent_kill_s`` seconds (its trials die with their node's agent when it
comes back) and starts it again, and on PostgreSQL terminates the master's database backends
every ``pg_kill_s`` seconds.

When the search is over (or ``minutes`` plus a grace have passed), the master is stopped and its
database is read directly. The promises (:func:`check`):

- the experiment is COMPLETED;
- no metric report is stored twice (per trial, run, group and step), and every report of a run
  that ended by itself (its journal's ``end``: the harness flushed it) is stored;
- every checkpoint the master acknowledged (``ckpt`` in a journal) is stored, once;
- no trial ran a step twice past its last checkpoint: each run resumes from a step no earlier
  than the latest checkpoint acknowledged before it started;
- no id was handed out twice (trials, checkpoints).
"""

from __future__ import annotations

import base64
import contextlib
import random
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, func, select, text

from bench.common import (
    BenchError,
    Measurement,
    Options,
    _free_port,
    print_table,
    write_results,
)
from bench.load import PG_URL, pg_schema
from stalwart.local import LocalCluster, LocalClusterError
from stalwart.master.db.tables import Allocation, Checkpoint, Experiment, MetricReport, Trial

__all__ = [
    "FULL",
    "NAME",
    "QUICK",
    "Journal",
    "SoakPlan",
    "SoakResult",
    "Stored",
    "check",
    "read_database",
    "read_journals",
    "run",
    "run_soak",
]

NAME = "soak"

TRIAL = Path(__file__).resolve().parent / "trials" / "soak_train.py"


@dataclass(frozen=True)
class SoakPlan:
    """How long, how big and how violent one soak is."""

    minutes: float
    trials: int
    max_steps: int
    period: int
    step_seconds: float
    agents: int
    slots_per_agent: int
    master_kill_s: tuple[float, float]
    agent_kill_s: tuple[float, float]
    pg_kill_s: tuple[float, float]
    seed: int = 20
    grace_minutes: float = 10.0
    """After ``minutes``, the chaos stops and the search gets this long to finish."""


FULL = SoakPlan(
    minutes=20,
    trials=40,
    max_steps=192,
    period=6,
    step_seconds=3.6,
    agents=2,
    slots_per_agent=2,
    master_kill_s=(60, 120),
    agent_kill_s=(90, 180),
    pg_kill_s=(20, 40),
)
"""The issue's soak: 40 trials for 20 minutes, the master killed every 60-120 s, an agent
every 90-180 s. Sized so that the search (rungs at 12, 48 and 192 steps of 3.6 s, on 4 slots)
outlasts the 20 minutes of chaos and ends within the grace: with steps of 3.2 s the PostgreSQL
search ended after 19.1 minutes, a minute before the chaos did."""

QUICK = SoakPlan(
    minutes=1.5,
    trials=8,
    max_steps=64,
    period=4,
    step_seconds=0.25,
    agents=2,
    slots_per_agent=1,
    master_kill_s=(15, 25),
    agent_kill_s=(20, 35),
    pg_kill_s=(5, 10),
    grace_minutes=4.0,
)
"""The short version (``make test``): the same kills, closer together."""

MASTER_CONFIG = """\
cluster:
  agent_timeout: 6
  preemption_timeout: 30
  kill_grace: 2
  tick: 0.5
"""


def experiment_config(plan: SoakPlan, journal: Path, storage: Path) -> str:
    """The adaptive_asha search the soak runs."""
    return f"""\
name: chaos-soak
entrypoint: python3 train.py
max_restarts: 1000
checkpoint_storage:
  type: shared_fs
  host_path: {storage}
  save_experiment_best: 0
  save_trial_best: 1
  save_trial_latest: 1
resources:
  slots_per_trial: 1
hyperparameters:
  x:
    type: double
    minval: 0
    maxval: 1
  step_seconds: {plan.step_seconds}
  period: {plan.period}
  max_steps: {plan.max_steps}
  journal: {journal}
searcher:
  name: adaptive_asha
  metric: loss
  smaller_is_better: true
  time_metric: batches
  max_time: {plan.max_steps}
  max_trials: {plan.trials}
  max_concurrent_trials: {plan.agents * plan.slots_per_agent}
  divisor: 4
  max_rungs: 3
  mode: aggressive
"""


# -- the journals ----------------------------------------------------------------------------


@dataclass
class Journal:
    """What one trial's runs journaled (``bench/trials/soak_train.py``), in order."""

    starts: list[tuple[int, int, int]] = field(default_factory=list)
    """``(run, from step, max acknowledged checkpoint step before it)``."""
    reports: set[tuple[int, str, int]] = field(default_factory=set)
    """``(run, group, step)`` handed to the harness."""
    checkpoints: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Acknowledged checkpoint uuid -> ``(run, step)``."""
    ended: set[int] = field(default_factory=set)
    """Runs that ended by themselves (their reports flushed)."""


def read_journals(directory: Path) -> dict[int, Journal]:
    """Every trial's journal, by trial id."""
    out: dict[int, Journal] = {}
    for path in sorted(directory.glob("*.log")):
        journal = out.setdefault(int(path.stem), Journal())
        acked = 0
        for line in path.read_text(encoding="utf-8").splitlines():
            kind, *rest = line.split()
            if kind == "start":
                journal.starts.append((int(rest[0]), int(rest[1]), acked))
            elif kind == "report":
                journal.reports.add((int(rest[0]), rest[1], int(rest[2])))
            elif kind == "ckpt":
                step = int(rest[1])
                journal.checkpoints[rest[2]] = (int(rest[0]), step)
                acked = max(acked, step)
            elif kind == "end":
                journal.ended.add(int(rest[0]))
    return out


# -- checking ----------------------------------------------------------------------------------


@dataclass
class SoakResult:
    """What one soak did and found."""

    database: str
    seconds: float
    kills: Counter[str] = field(default_factory=Counter)
    experiment_state: str = ""
    trials: int = 0
    runs: int = 0
    reports_stored: int = 0
    reports_flushed: int = 0
    checkpoints_acked: int = 0
    lost_reports: list[str] = field(default_factory=list)
    duplicated_reports: list[str] = field(default_factory=list)
    lost_checkpoints: list[str] = field(default_factory=list)
    repeated_steps: list[str] = field(default_factory=list)
    reused_ids: list[str] = field(default_factory=list)
    trial_states: dict[str, int] = field(default_factory=dict)
    live_allocations: int = 0
    pending_exits: int = 0

    @property
    def problems(self) -> list[str]:
        """Every broken promise, in words (empty: the soak passed)."""
        out: list[str] = []
        if self.experiment_state != "COMPLETED":
            states = ", ".join(f"{n} {state}" for state, n in sorted(self.trial_states.items()))
            out.append(
                f"the experiment ended {self.experiment_state or 'nowhere'}, not COMPLETED "
                f"(trials: {states or 'none'}; {self.live_allocations} allocations live; "
                f"{self.pending_exits} trial exits not yet fed to the searcher)"
            )
        for what, found in (
            ("metric reports lost", self.lost_reports),
            ("metric reports stored twice", self.duplicated_reports),
            ("acknowledged checkpoints lost", self.lost_checkpoints),
            ("steps run again past their checkpoint", self.repeated_steps),
            ("ids handed out twice", self.reused_ids),
        ):
            if found:
                out.append(f"{len(found)} {what}: {', '.join(found[:10])}")
        return out


@dataclass
class Stored:
    """What the master's database holds of the soak's experiment."""

    experiment_state: str
    trial_ids: list[int]
    reports: Counter[tuple[int, int, str, int]]
    """``(trial, run, group, step)`` -> rows stored."""
    checkpoints: Counter[str]
    """Checkpoint uuid -> rows stored."""
    trial_states: Counter[str] = field(default_factory=Counter)
    """Trials by state at the end (what a search that did not finish was waiting for)."""
    live_allocations: int = 0
    pending_exits: int = 0
    """Trials whose exit their searcher has not been fed yet (``trials.searcher_exit``)."""


def read_database(db_url: str, experiment_id: int) -> Stored:
    """Read the soak's experiment from the master's database (the master stopped)."""
    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            state = conn.scalar(select(Experiment.state).where(Experiment.id == experiment_id))
            trial_ids = list(
                conn.scalars(select(Trial.id).where(Trial.experiment_id == experiment_id))
            )
            rows = conn.execute(
                select(
                    MetricReport.trial_id,
                    MetricReport.trial_run_id,
                    MetricReport.group,
                    MetricReport.steps_completed,
                ).where(MetricReport.trial_id.in_(trial_ids), MetricReport.group != "system")
            ).all()
            checkpoints = Counter(
                conn.scalars(select(Checkpoint.uuid).where(Checkpoint.trial_id.in_(trial_ids)))
            )
            trial_rows = conn.execute(
                select(Trial.state, Trial.searcher_exit).where(Trial.experiment_id == experiment_id)
            ).all()
            live = conn.scalar(
                select(func.count())
                .select_from(Allocation)
                .join(Trial, Trial.task_id == Allocation.task_id)
                .where(Trial.experiment_id == experiment_id, Allocation.state != "TERMINATED")
            )
    finally:
        engine.dispose()
    reports = Counter((int(t), int(r), str(g), int(s)) for t, r, g, s in rows)
    return Stored(
        str(state or ""),
        trial_ids,
        reports,
        checkpoints,
        trial_states=Counter(str(row.state) for row in trial_rows),
        live_allocations=int(live or 0),
        pending_exits=sum(1 for row in trial_rows if row.searcher_exit is not None),
    )


def check(stored: Stored, journals: dict[int, Journal], result: SoakResult) -> None:
    """Hold what the database stores to what the trials journaled; fill ``result``'s
    findings (see the module docstring for the promises)."""
    result.experiment_state = stored.experiment_state
    result.trials = len(stored.trial_ids)
    result.trial_states = dict(stored.trial_states)
    result.live_allocations = stored.live_allocations
    result.pending_exits = stored.pending_exits
    result.reused_ids += [f"trial {t}" for t, n in Counter(stored.trial_ids).items() if n > 1]
    result.reused_ids += [f"checkpoint {u}" for u, n in stored.checkpoints.items() if n > 1]
    result.reports_stored = sum(stored.reports.values())
    result.duplicated_reports += [
        f"trial {t} run {r} {g} step {s} x{n}"
        for (t, r, g, s), n in stored.reports.items()
        if n > 1
    ]
    for trial_id, journal in sorted(journals.items()):
        result.runs += len(journal.starts)
        for run_id, group, step in sorted(journal.reports):
            if run_id not in journal.ended:
                continue  # killed mid-run: what it had not shipped was never acknowledged
            result.reports_flushed += 1
            if stored.reports[(trial_id, run_id, group, step)] == 0:
                result.lost_reports.append(f"trial {trial_id} run {run_id} {group} step {step}")
        for checkpoint, (run_id, step) in sorted(journal.checkpoints.items()):
            result.checkpoints_acked += 1
            if stored.checkpoints[checkpoint] == 0:
                result.lost_checkpoints.append(f"trial {trial_id} run {run_id} step {step}")
        for run_id, start, acked in journal.starts:
            if start < acked:
                result.repeated_steps.append(
                    f"trial {trial_id} run {run_id} resumed after step {start}, though step "
                    f"{acked} was checkpointed"
                )


# -- the chaos ---------------------------------------------------------------------------------


class Chaos:
    """The driver's threads: each kills one thing at seeded random intervals until stopped."""

    def __init__(self, cluster: LocalCluster, plan: SoakPlan, pg_app: str | None) -> None:
        self.cluster = cluster
        self.plan = plan
        self.pg_app = pg_app
        self.stop = threading.Event()
        self.kills: Counter[str] = Counter()
        self.errors: list[str] = []
        self.restarting = threading.Lock()
        """Held while the master or an agent restarts (they must not restart at once)."""
        self._threads: list[threading.Thread] = []

    def _every(self, name: str, span: tuple[float, float], action: Callable[[], None]) -> None:
        rng = random.Random(f"{self.plan.seed}-{name}")
        while not self.stop.wait(rng.uniform(*span)):
            try:
                action()
            except (LocalClusterError, OSError) as exc:
                self.errors.append(f"{name}: {exc}")
                return
            self.kills[name] += 1

    def _kill_master(self) -> None:
        with self.restarting:
            self.cluster.kill_master()
            try:
                self.cluster.start_master(timeout=120)
            except LocalClusterError:
                master = self.cluster.master
                if master is not None and master.poll() is None:
                    # Hung while starting: SIGABRT makes faulthandler write every thread's
                    # stack to master.log before the process dies.
                    master.send_signal(signal.SIGABRT)
                    master.wait()
                    self.cluster.master = None
                raise

    def _kill_agent(self) -> None:
        rng = random.Random(f"{self.plan.seed}-agent-{self.kills['agent']}")
        agent_id = f"a{rng.randrange(self.plan.agents) + 1}"
        with self.restarting:
            self.cluster.stop_agent(agent_id, sig=9)
            self.cluster.start_agent(agent_id, slots=self.plan.slots_per_agent, timeout=120)

    def _kill_backends(self) -> None:
        engine = create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "select pg_terminate_backend(pid) from pg_stat_activity where "
                        "datname = current_database() and pid <> pg_backend_pid() and "
                        "application_name = :app"
                    ),
                    {"app": self.pg_app},
                )
        finally:
            engine.dispose()

    def start(self) -> None:
        jobs = [
            ("master", self.plan.master_kill_s, self._kill_master),
            ("agent", self.plan.agent_kill_s, self._kill_agent),
        ]
        if self.pg_app is not None:
            jobs.append(("pg-backends", self.plan.pg_kill_s, self._kill_backends))
        for name, span, action in jobs:
            thread = threading.Thread(
                target=self._every, args=(name, span, action), name=f"chaos-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def finish(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=300)


# -- one soak ----------------------------------------------------------------------------------


def _experiment_state(url: str, token: str, experiment_id: int) -> str | None:
    """The experiment's state, or None while the master cannot answer (it is being killed)."""
    try:
        resp = httpx.get(
            f"{url}/api/v1/experiments/{experiment_id}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    return str(resp.json()["experiment"]["state"])


def _login(url: str) -> str:
    resp = httpx.post(
        f"{url}/api/v1/auth/login", json={"username": "admin", "password": ""}, timeout=30
    )
    resp.raise_for_status()
    return str(resp.json()["token"])


def _create(url: str, token: str, config: str) -> int:
    content = base64.b64encode(TRIAL.read_bytes()).decode()
    files = [{"path": "train.py", "type": 48, "content": content, "mode": 0o100644}]
    resp = httpx.post(
        f"{url}/api/v1/experiments",
        json={"activate": True, "config": config, "modelDefinition": files},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    if resp.status_code != 200:
        raise BenchError(f"creating the soak's experiment failed: {resp.text}")
    return int(resp.json()["experiment"]["id"])


def run_soak(plan: SoakPlan, workdir: Path, db_url: str | None = None) -> SoakResult:
    """Run one soak in ``workdir`` on ``db_url`` (None: SQLite in the master's home)."""
    journal = workdir / "journal"
    storage = workdir / "checkpoints"
    journal.mkdir(parents=True)
    storage.mkdir()
    pg_app = None
    if db_url is not None:
        pg_app = f"stalwart-soak-{uuid.uuid4().hex[:8]}"
        db_url = f"{db_url}&application_name={pg_app}"
    config_path = workdir / "master.yaml"
    config_path.write_text(MASTER_CONFIG)
    cluster = LocalCluster(
        home=workdir / "home",
        port=_free_port(),
        db=db_url,
        master_config=config_path,
        env={"PYTHONFAULTHANDLER": "1"},  # a process that hangs can be made to tell where
    )
    result = SoakResult(database="postgresql" if db_url else "sqlite", seconds=0.0)
    started = time.monotonic()
    chaos = Chaos(cluster, plan, pg_app)
    try:
        cluster.start_master(timeout=120)
        for n in range(plan.agents):
            cluster.start_agent(f"a{n + 1}", slots=plan.slots_per_agent, timeout=120)
        token = _login(cluster.url)
        experiment_id = _create(cluster.url, token, experiment_config(plan, journal, storage))
        chaos.start()
        chaos_ends = started + plan.minutes * 60
        deadline = chaos_ends + plan.grace_minutes * 60
        state: str | None = None
        while time.monotonic() < deadline:
            if time.monotonic() >= chaos_ends and not chaos.stop.is_set():
                chaos.finish()
            with chaos.restarting:  # not while the master restarts
                state = _experiment_state(cluster.url, token, experiment_id)
            if state in ("STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"):
                break
            time.sleep(2.0)
    finally:
        chaos.finish()
        cluster.stop(timeout=30)
    result.seconds = time.monotonic() - started
    result.kills = chaos.kills
    url = db_url or f"sqlite:///{workdir / 'home' / 'master.db'}"
    check(read_database(url, experiment_id), read_journals(journal), result)
    if chaos.errors:
        raise BenchError("the chaos driver failed: " + "; ".join(chaos.errors))
    return result


@contextlib.contextmanager
def _workdir(options: Options, name: str) -> Iterator[Path]:
    if options.workdir is not None:
        path = options.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix=f"stalwart-soak-{name}-"))
    try:
        yield path
    finally:
        if not options.keep:
            shutil.rmtree(path, ignore_errors=True)


def _measurements(result: SoakResult) -> list[Measurement]:
    db = result.database
    lost = len(result.lost_reports) + len(result.lost_checkpoints)
    return [
        Measurement(
            f"{db}: experiment",
            None,
            result.experiment_state,
            "COMPLETED",
            result.experiment_state == "COMPLETED",
        ),
        Measurement(f"{db}: duration", result.seconds, "s"),
        Measurement(
            f"{db}: kills (master, agent, pg backends)",
            sum(result.kills.values()),
            "kills",
            stats=dict(result.kills),
        ),
        Measurement(f"{db}: trials / runs", result.runs, "runs", stats={"trials": result.trials}),
        Measurement(f"{db}: reports stored", result.reports_stored, "reports"),
        Measurement(f"{db}: acknowledged lost", lost, "reports+checkpoints", "0", lost == 0),
        Measurement(
            f"{db}: duplicated",
            len(result.duplicated_reports),
            "reports",
            "0",
            not result.duplicated_reports,
        ),
        Measurement(
            f"{db}: steps re-run past a checkpoint",
            len(result.repeated_steps),
            "runs",
            "0",
            not result.repeated_steps,
        ),
        Measurement(f"{db}: ids reused", len(result.reused_ids), "ids", "0", not result.reused_ids),
    ]


def run(options: Options) -> list[Measurement]:
    """Both databases, the full plan (``--quick``: the short one)."""
    plan = QUICK if options.quick else FULL
    results: list[SoakResult] = []
    if "sqlite" in options.databases:
        with _workdir(options, "sqlite") as work:
            results.append(run_soak(plan, work))
    if "postgresql" in options.databases:
        with pg_schema() as db_url, _workdir(options, "postgresql") as work:
            results.append(run_soak(plan, work, db_url))
    measurements = [m for r in results for m in _measurements(r)]
    print_table(f"chaos soak ({'quick' if options.quick else 'full'})", measurements)
    extra: dict[str, Any] = {"plan": plan.__dict__, "problems": [r.problems for r in results]}
    write_results(NAME, options, measurements, extra)
    return measurements
