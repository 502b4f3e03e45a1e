"""B1 on a peer: N trials that each sleep 1 s and report one metric, 16 at a time.

Runs in the peers' virtual environment (``.cache/bench-peers``, from
``bench/requirements-peers.txt``), never in the project's: ``bench/b1.py`` starts it as

    .cache/bench-peers/bin/python bench/peers/sleep_trials.py {ray_tune,ray_tune_reuse,optuna} \
        --trials N --slots 16 --out RESULT.json --work DIR

and reads RESULT.json: the wall time of the search alone (``Tuner.fit()`` /
``study.optimize()``; starting Ray is timed apart, as starting the master and agent is on
Stalwart's side), and every trial's start and end in epoch seconds. Only the standard library
is imported here besides the peer under test.

- Ray Tune: ``ray.init(num_cpus=SLOTS)`` (16 logical CPUs on whatever the machine has:
  oversubscribed on purpose, as Stalwart's 16 slots are), a function trainable that sleeps 1 s
  and calls ``tune.report({"loss": x, ...})`` once, ``TuneConfig(num_samples=N,
  max_concurrent_trials=SLOTS)``, 1 CPU per trial, Ray's defaults otherwise (loggers,
  checkpoint-free trials). ``ray_tune`` keeps Ray's default ``reuse_actors=False`` (a new
  actor process per trial); ``ray_tune_reuse`` sets ``reuse_actors=True`` (Ray's own
  benchmark setting). Trial start/end are stamped by the trial itself (first and last line of
  the trainable), so the gap includes actor start-up.
- Optuna: an in-memory study, ``study.optimize(objective, n_trials=N, n_jobs=SLOTS)``; the
  objective sleeps 1 s and returns a value. Start/end are Optuna's own ``datetime_start`` and
  ``datetime_complete`` of each trial.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _ray_tune(trials: int, slots: int, work: Path, reuse_actors: bool) -> dict[str, Any]:
    import ray  # type: ignore[import-not-found]
    from ray import tune

    ray_tmp = tempfile.mkdtemp(prefix="b1ray-")
    init_started = time.monotonic()
    ray.init(
        num_cpus=slots,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        # Ray's sockets live under its temp dir and must fit AF_UNIX's 107 bytes: keep it short
        _temp_dir=ray_tmp,
    )
    init_s = time.monotonic() - init_started

    def trainable(config: dict[str, Any]) -> None:
        start = time.time()
        time.sleep(1.0)
        tune.report({"loss": config["x"], "stamp_start": start, "stamp_end": time.time()})

    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"x": tune.uniform(0.0, 1.0)},
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            num_samples=trials,
            max_concurrent_trials=slots,
            reuse_actors=reuse_actors,
        ),
        run_config=tune.RunConfig(name="b1-sleep", storage_path=str(work / "results"), verbose=0),
    )
    started = time.monotonic()
    grid = tuner.fit()
    wall = time.monotonic() - started
    spans: list[tuple[float, float]] = []
    errors = 0
    for result in grid:
        metrics = result.metrics or {}
        if result.error is not None or "stamp_start" not in metrics:
            errors += 1
            continue
        spans.append((float(metrics["stamp_start"]), float(metrics["stamp_end"])))
    ray.shutdown()
    shutil.rmtree(ray_tmp, ignore_errors=True)
    return {
        "wall_s": wall,
        "startup_s": init_s,
        "spans": spans,
        "errors": errors,
        "version": ray.__version__,
        "span_source": "stamped by the trainable (first line, after tune.report)",
        "reuse_actors": reuse_actors,
    }


def _optuna(trials: int, slots: int) -> dict[str, Any]:
    import optuna  # type: ignore[import-not-found]

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial: Any) -> float:
        x = float(trial.suggest_float("x", 0.0, 1.0))
        time.sleep(1.0)
        return x

    init_started = time.monotonic()
    study = optuna.create_study(direction="minimize")
    init_s = time.monotonic() - init_started
    started = time.monotonic()
    study.optimize(objective, n_trials=trials, n_jobs=slots)
    wall = time.monotonic() - started
    spans: list[tuple[float, float]] = []
    errors = 0
    for trial in study.trials:
        if trial.datetime_start is None or trial.datetime_complete is None:
            errors += 1
            continue
        # naive local datetimes: .timestamp() reads them in the local zone, consistently
        spans.append((trial.datetime_start.timestamp(), trial.datetime_complete.timestamp()))
    errors += sum(1 for t in study.trials if t.state != optuna.trial.TrialState.COMPLETE)
    return {
        "wall_s": wall,
        "startup_s": init_s,
        "spans": spans,
        "errors": errors,
        "version": optuna.__version__,
        "span_source": "Optuna's trial.datetime_start / datetime_complete",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=["ray_tune", "ray_tune_reuse", "optuna"])
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix=f"stalwart-b1-{args.peer}-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.peer.startswith("ray_tune"):
        # Ray's usage-stats prompt and its periodic report would only add noise (and no network)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        result = _ray_tune(args.trials, args.slots, work, args.peer == "ray_tune_reuse")
    else:
        result = _optuna(args.trials, args.slots)
    result.update(peer=args.peer, trials=args.trials, slots=args.slots, python=sys.version)
    args.out.write_text(json.dumps(result) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
