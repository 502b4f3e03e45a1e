"""B4 on the peers: Ray Tune's ASHA and Optuna's successive-halving pruner, in simulation.

Runs in the peers' virtual environment (``.cache/bench-peers``); ``bench/b4.py`` starts it as

    .cache/bench-peers/bin/python bench/peers/search_peers.py --problems branin,mlp \
        --workers 1,4,16 --seeds 30 --budget 2700 --grid 100 --out RESULT.json

and reads RESULT.json: ``{"versions": {...}, "runs": {"<algorithm>/<problem>/<workers>":
{"regret": [[per grid point] per seed], "trials": [...], "reports": [...]}}}``.

The same simulator and problems as Stalwart's side (:mod:`bench.search.sim`, imported from the
repository: numpy and the standard library only) drive each peer's own early-stopping code,
called as its framework calls it, with random sampling of ``x`` in [0, 1]^d:

- ``ray_asha``: ``ray.tune.schedulers.AsyncHyperBandScheduler(time_attr="epochs",
  metric="loss", mode="min", max_t=27, grace_period=1, reduction_factor=3, brackets=1)``;
  ``on_trial_add`` for a new trial, ``on_trial_result`` for each report (``STOP`` stops it),
  ``on_trial_complete`` when it ends. The scheduler only reads ``trial.trial_id``.
- ``optuna_sha``: an in-memory study with ``RandomSampler(seed)`` and
  ``SuccessiveHalvingPruner(min_resource=1, reduction_factor=3, min_early_stopping_rate=0)``;
  ``study.ask()`` for a new trial, ``trial.report(loss, epoch)`` then ``trial.should_prune()``
  for each report, ``study.tell`` (PRUNED, or the final loss) when it ends.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from bench.search.problems import MAX_EPOCHS, PROBLEMS, Vector
from bench.search.sim import compute_grid, regret_on_grid, simulate


class _Trial:
    """What Ray's scheduler reads of a trial."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id

    def __repr__(self) -> str:
        return self.trial_id


class RayAsha:
    """Ray Tune's ASHA (``AsyncHyperBandScheduler``), random configurations."""

    def __init__(self, dims: int, seed: int) -> None:
        from ray.tune.schedulers import (  # type: ignore[import-not-found]
            AsyncHyperBandScheduler,
            TrialScheduler,
        )

        np.random.seed(seed)  # the scheduler draws its bracket from numpy's global generator
        self._stop = TrialScheduler.STOP
        self._scheduler = AsyncHyperBandScheduler(
            time_attr="epochs",
            metric="loss",
            mode="min",
            max_t=MAX_EPOCHS,
            grace_period=1,
            reduction_factor=3,
            brackets=1,
        )
        self._rng = np.random.default_rng(seed)
        self._dims = dims
        self._trials: dict[str, _Trial] = {}
        self._last: dict[str, dict[str, float]] = {}
        self._count = 0

    def new_trial(self) -> tuple[str, Vector] | None:
        trial = _Trial(f"t{self._count}")
        self._count += 1
        self._trials[trial.trial_id] = trial
        self._scheduler.on_trial_add(None, trial)
        return trial.trial_id, self._rng.random(self._dims)

    def report(self, trial_id: str, epoch: int, loss: float) -> bool:
        result = {"epochs": float(epoch), "loss": loss}
        self._last[trial_id] = result
        action = self._scheduler.on_trial_result(None, self._trials[trial_id], result)
        return bool(action == self._stop)

    def finished(self, trial_id: str) -> None:
        result = self._last.pop(trial_id)
        self._scheduler.on_trial_complete(None, self._trials.pop(trial_id), result)


class OptunaSha:
    """Optuna's ``SuccessiveHalvingPruner`` with its ``RandomSampler``."""

    def __init__(self, dims: int, seed: int) -> None:
        import optuna  # type: ignore[import-not-found]

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self._optuna = optuna
        self._study = optuna.create_study(
            direction="minimize",
            sampler=optuna.samplers.RandomSampler(seed=seed),
            pruner=optuna.pruners.SuccessiveHalvingPruner(
                min_resource=1, reduction_factor=3, min_early_stopping_rate=0
            ),
        )
        self._dims = dims
        self._trials: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._pruned: set[str] = set()

    def new_trial(self) -> tuple[str, Vector] | None:
        trial = self._study.ask()
        x = np.array([trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(self._dims)])
        trial_id = str(trial.number)
        self._trials[trial_id] = trial
        return trial_id, x

    def report(self, trial_id: str, epoch: int, loss: float) -> bool:
        trial = self._trials[trial_id]
        trial.report(loss, epoch)
        self._last[trial_id] = loss
        if epoch < MAX_EPOCHS and trial.should_prune():
            self._pruned.add(trial_id)
            return True
        return False

    def finished(self, trial_id: str) -> None:
        trial = self._trials.pop(trial_id)
        if trial_id in self._pruned:
            self._pruned.discard(trial_id)
            self._study.tell(trial, state=self._optuna.trial.TrialState.PRUNED)
        else:
            self._study.tell(trial, self._last[trial_id])
        self._last.pop(trial_id, None)


ALGORITHMS: dict[str, type[RayAsha] | type[OptunaSha]] = {
    "ray_asha": RayAsha,
    "optuna_sha": OptunaSha,
}


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"ray": version("ray"), "optuna": version("optuna"), "numpy": version("numpy")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--grid", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.getLogger("ray").setLevel(logging.ERROR)
    grid = compute_grid(args.budget, args.grid)
    runs: dict[str, dict[str, list[Any]]] = {}
    for algorithm in args.algorithms.split(","):
        for problem_name in args.problems.split(","):
            problem = PROBLEMS[problem_name]
            for workers in (int(w) for w in args.workers.split(",")):
                run: dict[str, list[Any]] = {"regret": [], "trials": [], "reports": []}
                for seed in range(args.seeds):
                    policy = ALGORITHMS[algorithm](problem.dims, seed)
                    trace = simulate(problem, policy, workers, args.budget, seed)
                    run["regret"].append(regret_on_grid(trace, grid))
                    run["trials"].append(trace.trials)
                    run["reports"].append(trace.reports)
                runs[f"{algorithm}/{problem_name}/{workers}"] = run
                print(f"{algorithm}/{problem_name}/{workers} done", flush=True)
    payload = {"versions": _versions(), "runs": runs}
    args.out.write_text(json.dumps(payload), encoding="utf-8")


if __name__ == "__main__":
    main()
