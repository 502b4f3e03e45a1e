"""``slurm``: an experiment of many tiny trials through the master's Slurm resource manager.

Needs a running Slurm (``sudo scripts/slurm/setup.sh``; the benchmark says so and stops when
``sinfo`` does not answer). Setup: ``stalwart master`` with ``resource_manager: {type: slurm}``
(the default ``poll_interval`` of 2 s) on a fresh home (SQLite), its ``PATH`` starting with a
directory of shims that log every ``squeue``/``sacct``/``sinfo``/``sbatch``/``scancel`` call
(with its time) before running the real command. Then one experiment of ``--trials`` tiny Core
API trials (a random search, all of them concurrent: every trial is a Slurm job at once; on a
small machine most of them queue), and:

- ``poll_calls_per_s``: squeue + sacct calls of the master per second during a
  :data:`WINDOW_S`-second window that begins once every trial was submitted (jobs running and
  queued). Target < 1 call/s in total.
- ``slurm_start_to_first_metric_p50``: for the trials that started in the window, the master's
  receipt of the trial's first metric (``metric_reports.report_time``) minus the moment Slurm
  started the job (the creation of its ``slurm-<id>.out`` by slurmstepd, sub-second, rather
  than Slurm's whole-second ``StartTime``). Target p50 < 2 s.
- ``submit_rate``: sbatch calls per second while the master submitted the experiment's jobs.

Then the experiment is killed (the master ``scancel``\\ s its jobs) and the benchmark waits for
the jobs to leave the queue. ``--quick``: 100 trials, a 30 s window.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench.cluster import _create, _login
from bench.common import (
    BenchError,
    Measurement,
    Options,
    _free_port,
    latency_stats,
    print_table,
    write_results,
)
from stalwart.local import LocalCluster

__all__ = ["NAME", "WINDOW_S", "run"]

NAME = "slurm"
WINDOW_S = 60.0
COMMANDS = ("squeue", "sacct", "sinfo", "sbatch", "scancel", "scontrol")

TRIAL = """\
import stalwart as det

with det.core.init() as ctx:
    ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
"""


def _shims(directory: Path, calls: Path) -> None:
    """One script per Slurm command: append ``<epoch> <command>`` to ``calls``, run the real
    one (found on the ``PATH`` without ``directory``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        real = shutil.which(name)
        if real is None:
            continue
        path = directory / name
        path.write_text(f'#!/bin/sh\necho "$(date +%s.%N) {name}" >> {calls}\nexec {real} "$@"\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _calls(path: Path) -> list[tuple[float, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        stamp, _, name = line.partition(" ")
        try:
            out.append((float(stamp), name))
        except ValueError:
            continue
    return out


def _epoch(text: str) -> float:
    value = dt.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def _first_metrics(db: Path, exp_id: int) -> dict[str, float]:
    """Allocation id -> the master's receipt of its trial's first metric (epoch seconds)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select a.id, min(m.report_time) from allocations a "
            "join trials t on t.task_id = a.task_id "
            "join metric_reports m on m.trial_id = t.id "
            "where t.experiment_id = ? group by a.id",
            (exp_id,),
        ).fetchall()
    return {str(a): _epoch(r) for a, r in rows if r}


def _slurm_starts(job_root: Path) -> dict[str, float]:
    """Allocation id -> when slurmstepd created the job's output file (epoch seconds)."""
    starts = {}
    for job_dir in job_root.iterdir():
        outs = list(job_dir.glob("slurm-*.out"))
        if outs:
            starts[job_dir.name] = min(o.stat().st_ctime for o in outs)
    return starts


def _submitted(calls: Path) -> int:
    return sum(1 for _, name in _calls(calls) if name == "sbatch")


def _queue_size() -> int:
    out = subprocess.run(
        ["squeue", "--noheader", "--format=%j"], capture_output=True, text=True, check=False
    ).stdout
    return sum(1 for line in out.splitlines() if line.startswith("stalwart-"))


def _cancel_leftovers(job_root: Path) -> None:
    """scancel the jobs of this run's allocations still queued (a master that did not)."""
    if not job_root.exists():
        return
    names = {f"stalwart-{p.name}" for p in job_root.iterdir() if p.is_dir()}
    out = subprocess.run(
        ["squeue", "--noheader", "--format=%i|%j"], capture_output=True, text=True, check=False
    ).stdout
    ids = [
        job for job, _, name in (line.partition("|") for line in out.splitlines()) if name in names
    ]
    if ids:
        subprocess.run(["scancel", *ids], check=False)


def run(options: Options) -> list[Measurement]:
    """Run the Slurm benchmark (see the module docstring)."""
    if shutil.which("sinfo") is None or subprocess.run(["sinfo"], capture_output=True).returncode:
        raise BenchError("no Slurm answers here: start one with `sudo scripts/slurm/setup.sh`")
    trials = 100 if options.quick else 500
    window = 30.0 if options.quick else WINDOW_S
    work = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-slurm-"))
    work.mkdir(parents=True, exist_ok=True)
    job_root = work / "jobs"
    calls = work / "slurm-calls.log"
    _shims(work / "shims", calls)
    config = work / "master.yaml"
    config.write_text(
        f"cluster:\n  tick: 1.0\nresource_manager:\n  type: slurm\n  job_storage_root: {job_root}\n"
    )
    env = {"PATH": f"{work / 'shims'}{os.pathsep}{os.environ.get('PATH', '')}"}
    cluster = LocalCluster(home=work / "home", port=_free_port(), master_config=config, env=env)
    client: httpx.Client | None = None
    exp_id: int | None = None
    try:
        cluster.start_master()
        client = _login(cluster.url)
        experiment = (
            "name: slurm-bench\nentrypoint: python3 trial.py\nmax_restarts: 0\n"
            "resources:\n  slots_per_trial: 1\n"
            "hyperparameters:\n  x:\n    type: double\n    minval: 0\n    maxval: 1\n"
            f"searcher:\n  name: random\n  metric: loss\n  max_trials: {trials}\n"
            f"  max_concurrent_trials: {trials}\n"
        )
        created = time.time()
        exp_id = _create(client, experiment, {"trial.py": TRIAL})
        deadline = time.monotonic() + 600
        while _submitted(calls) < trials:
            if time.monotonic() > deadline:
                raise BenchError(f"only {_submitted(calls)} of {trials} jobs were submitted")
            time.sleep(0.5)
        submitted_at = time.time()
        sbatch_times = [t for t, name in _calls(calls) if name == "sbatch"]
        time.sleep(window)
        window_end = time.time()
        in_window = [name for t, name in _calls(calls) if submitted_at <= t < window_end]
        polls = sum(1 for name in in_window if name in ("squeue", "sacct"))
        rate = polls / (window_end - submitted_at)
        starts = _slurm_starts(job_root)
        firsts = _first_metrics(cluster.home / "master.db", exp_id)
        samples = [firsts[a] - s for a, s in starts.items() if a in firsts]
        if not samples:
            raise BenchError("no trial reported a metric during the window")
        stats = latency_stats(samples)
        p50 = stats["p50_ms"] / 1000
        submit_span = max(sbatch_times) - min(sbatch_times) if len(sbatch_times) > 1 else 0.0
        counts = {name: sum(1 for n in in_window if n == name) for name in COMMANDS}
        results = [
            Measurement(
                name="poll_calls_per_s",
                value=rate,
                unit="calls/s",
                target="< 1 call/s",
                passed=rate < 1.0,
                stats={f"{k}_calls": float(v) for k, v in counts.items()},
                note=f"squeue + sacct over {window_end - submitted_at:.0f} s, "
                f"{trials} jobs running or queued",
            ),
            Measurement(
                name="slurm_start_to_first_metric_p50",
                value=p50,
                unit="s",
                target="< 2 s",
                passed=p50 < 2.0,
                stats=stats,
                note=f"{len(samples)} trials, slurmstepd start -> the master has the metric",
            ),
            Measurement(
                name="submit_rate",
                value=len(sbatch_times) / submit_span if submit_span else None,
                unit="jobs/s",
                stats={
                    "created_to_all_submitted_s": submitted_at - created,
                    "sbatch_calls": float(len(sbatch_times)),
                },
                note=f"{trials} sbatch calls by the master",
            ),
        ]
    finally:
        if client is not None:
            if exp_id is not None:
                client.post(f"/api/v1/experiments/{exp_id}/kill")
                drain = time.monotonic() + 300
                while _queue_size() and time.monotonic() < drain:
                    time.sleep(1.0)
                _cancel_leftovers(job_root)
            client.close()
        cluster.stop()
        if options.workdir is None and not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    print_table(NAME, results)
    path = write_results(
        NAME,
        options,
        results,
        {"setup": {"trials": trials, "window_s": window, "cpus": os.cpu_count()}},
    )
    print(f"raw results: {path}")
    return results
