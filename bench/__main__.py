"""``python -m bench run [--quick] [NAME...]``, ``python -m bench list``, and ``python -m bench
handovers [--trials N] [--workdir DIR]`` (B1's handovers stage by stage: :mod:`bench.handovers`).

Exit status: 0 when every benchmark ran (and, with ``--check``, met its targets); 1 when
``--check`` finds a missed target; 2 when a benchmark could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import (
    b1,
    b2,
    b3,
    b4,
    b5,
    cluster,
    experiment_list,
    handovers,
    harness,
    importer,
    load,
    master_api,
    slurm,
    soak,
    ui_experiment,
)
from bench.common import BenchError, Measurement, Options

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS: dict[str, tuple[Callable[[Options], list[Measurement]], str]] = {
    cluster.NAME: (
        cluster.run,
        "master + local agent: trial launch latency, 1,000 x 1 s trials on 16 slots",
    ),
    master_api.NAME: (
        master_api.run,
        "REST API on SQLite: GET/list latency with 10,000 experiments, metric ingest",
    ),
    experiment_list.NAME: (
        experiment_list.run,
        "experiment table, SQLite and PostgreSQL: 10,000 experiments sorted by searcher metric, "
        "hyperparameter, validation metric, filtered: p95 < 300 ms",
    ),
    slurm.NAME: (
        slurm.run,
        "Slurm resource manager: 500 tiny trials, squeue/sacct call rate, start -> first metric",
    ),
    harness.NAME: (
        harness.run,
        "Core API harness: report_training_metrics cost, 1,000,000 metric points to the master",
    ),
    b1.NAME: (
        b1.run,
        "B1 vs Ray Tune and Optuna: 1,000 x 1 s trials, 16 at a time, overhead over the floor",
    ),
    b2.NAME: (
        b2.run,
        "B2 vs MLflow: 1,000,000 metric points in and back, chart series, 100 trials at once",
    ),
    b3.NAME: (
        b3.run,
        "B3: 25 locust users on the CLI's and UI's read endpoints, 8,000 trials, p95 < 100 ms",
    ),
    b4.NAME: (
        b4.run,
        "B4 vs Ray Tune ASHA and Optuna SHA: regret vs compute on simulated workers, 30 seeds",
    ),
    b5.NAME: (
        b5.run,
        "B5 vs Ray Tune: allocation -> first user line, experiment create -> first metric",
    ),
    load.NAME: (
        load.run,
        "load on PostgreSQL: 100 trials x 10 Hz metrics x 5 min: loss, p99 ingest, master RSS",
    ),
    importer.NAME: (
        importer.run,
        "stalwart import determined: a Determined 0.38.1 history with 1,000,000 metric reports",
    ),
    ui_experiment.NAME: (
        ui_experiment.run,
        "experiment page in chromium: 100 trials x 10,000 points, curves drawn < 1 s cold, "
        "series requests < 500 ms cold, no polling once ended",
    ),
    soak.NAME: (
        soak.run,
        "chaos soak, SQLite and PostgreSQL: 40-trial ASHA for 20 min while master, agents and "
        "database backends are killed: nothing acknowledged lost or stored twice",
    ),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the benchmarks")
    trace = sub.add_parser(
        "handovers", help="B1's Stalwart part traced: where a handover's time goes, by stage"
    )
    trace.add_argument("--trials", type=int, default=320, help="trials (320; at least 32)")
    trace.add_argument("--workdir", type=Path, help="keep the run here (kept)")
    run = sub.add_parser("run", help="run benchmarks (all when no NAME is given)")
    run.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run")
    run.add_argument("--quick", action="store_true", help="fewer requests, shorter load phases")
    run.add_argument("--clients", type=int, default=8, help="concurrent load clients (8)")
    run.add_argument("--workdir", type=Path, help="keep the master's home here (kept)")
    run.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    run.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    run.add_argument(
        "--db",
        action="append",
        choices=["sqlite", "postgresql"],
        help="only this database, for the benchmarks that run on several (repeatable)",
    )
    run.add_argument("--trials", type=int, help="b1: trials per system (1000; 160 with --quick)")
    run.add_argument(
        "--peer",
        action="append",
        choices=["ray_tune", "ray_tune_reuse", "optuna"],
        help="b1: only this peer (repeatable; default: all three, without Ray's default "
        "actor-per-trial above 1,000 trials)",
    )
    run.add_argument(
        "--users", type=int, action="append", help="b3: locust users (repeatable; 25 and 100)"
    )
    run.add_argument(
        "--workers",
        type=int,
        action="append",
        help="b3: the master's worker processes (repeatable; 1 and 2)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        for name, (_, description) in BENCHMARKS.items():
            print(f"{name:14} {description}")
        return 0
    if args.command == "handovers":
        if args.trials < 32:
            print("--trials must be at least 32 (two waves of 16 make the first handovers)")
            return 2
        handovers.run(args.trials, args.workdir)
        return 0
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; see `python -m bench list`")
        return 2
    if args.clients < 1:
        print("--clients must be at least 1")
        return 2
    if args.trials is not None and args.trials < 16:
        print("--trials must be at least 16 (b1 runs 16 at a time)")
        return 2
    options = Options(
        quick=args.quick,
        clients=args.clients,
        workdir=args.workdir,
        keep=args.keep,
        databases=tuple(args.db) if args.db else ("sqlite", "postgresql"),
        trials=args.trials,
        peers=tuple(args.peer) if args.peer else None,
        users=tuple(args.users) if args.users else None,
        workers=tuple(args.workers) if args.workers else None,
    )
    missed = False
    for name in args.names or list(BENCHMARKS):
        try:
            measurements = BENCHMARKS[name][0](options)
        except BenchError as exc:
            print(f"{name}: could not run: {exc}", file=sys.stderr)
            return 2
        missed |= any(m.passed is False for m in measurements)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
