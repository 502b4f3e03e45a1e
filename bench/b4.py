"""``b4``: search quality against the peers, in simulation (issue 10, B4).

Four algorithms on the same synthetic multi-fidelity problems (:mod:`bench.search.problems`:
learning curves from known functions of the hyperparameters, with noise; nothing downloaded),
on 1, 4 and 16 simulated workers, 30 seeds each (10 with ``--quick``), with the same compute
budget of 2,700 epochs (100 full trainings of 27 epochs):

- ``random``: Stalwart's ``random`` searcher; every trial trains 27 epochs.
- ``asha``: Stalwart's ``async_halving`` searcher (rungs at 1, 3, 9, 27 epochs, divisor 3).
- ``ray_asha``: Ray Tune's ``AsyncHyperBandScheduler`` with the same rungs.
- ``optuna_sha``: Optuna's ``SuccessiveHalvingPruner`` with the same rungs.

The master's searcher classes and the peers' schedulers are called exactly as their frameworks
call them, from one event-driven simulator (:mod:`bench.search.sim`); the peers run in their own
virtual environment (``bench/peers/search_peers.py``). Regret (noise-free final loss of the
incumbent minus the optimum) is recorded against cumulative epochs and summarized per compute
point as a mean with a 95% bootstrap CI over seeds.

Targets, per problem and worker count: ``asha`` reaches ``random``'s final mean regret with at
most a third of the budget; and at equal compute (a third of the budget, and the whole budget)
``asha``'s mean regret is within or below each peer's CI (not significantly worse).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.b1 import ensure_peers_venv
from bench.common import BenchError, Measurement, Options, write_results
from bench.search.policies import stalwart_asha, stalwart_random
from bench.search.problems import MAX_EPOCHS, PROBLEMS
from bench.search.sim import compute_grid, regret_on_grid, simulate
from bench.search.stats import CurveSummary, compute_to_reach, summarize
from bench.sidebyside import format_table

__all__ = ["NAME", "PEERS", "not_worse", "run"]

NAME = "b4"
PEERS: tuple[str, ...] = ("ray_asha", "optuna_sha")
WORKERS: tuple[int, ...] = (1, 4, 16)
BUDGET = 100 * MAX_EPOCHS
GRID = 100
SEEDS = 30
QUICK_SEEDS = 10
COMPUTE_TARGET = 1 / 3
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "search_peers.py"


def not_worse(ours: CurveSummary, peer: CurveSummary, index: int) -> bool:
    """True when our mean regret at grid ``index`` is at most the top of the peer's CI there."""
    return ours.mean[index] <= peer.high[index]


def _ours(seeds: int) -> dict[str, dict[str, Any]]:
    grid = compute_grid(BUDGET, GRID)
    runs: dict[str, dict[str, Any]] = {}
    makers = {"random": stalwart_random, "asha": stalwart_asha}
    for algorithm, make in makers.items():
        max_trials = BUDGET // MAX_EPOCHS + max(WORKERS) if algorithm == "random" else BUDGET
        for problem in PROBLEMS.values():
            for workers in WORKERS:
                run: dict[str, Any] = {"regret": [], "trials": [], "reports": []}
                for seed in range(seeds):
                    policy = make(problem.dims, workers, max_trials, seed)
                    trace = simulate(problem, policy, workers, BUDGET, seed)
                    run["regret"].append(regret_on_grid(trace, grid))
                    run["trials"].append(trace.trials)
                    run["reports"].append(trace.reports)
                runs[f"{algorithm}/{problem.name}/{workers}"] = run
    return runs


def _peers(seeds: int, work: Path) -> dict[str, Any]:
    python, install_s = ensure_peers_venv()
    out = work / "peers.json"
    cmd = [str(python), str(PEER_SCRIPT), "--seeds", str(seeds), "--budget", str(BUDGET)]
    cmd += ["--grid", str(GRID), "--workers", ",".join(map(str, WORKERS)), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise BenchError(f"the peers' simulation exited with {done.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    result["install_s"] = install_s
    return result


def _cell(summary: CurveSummary, index: int) -> str:
    return f"{summary.mean[index]:.4f} [{summary.low[index]:.4f}, {summary.high[index]:.4f}]"


def _fraction(value: float | None) -> str:
    return "never" if value is None else f"{value / BUDGET:.2f}"


def run(options: Options) -> list[Measurement]:
    """Simulate every algorithm, print one table per problem and worker count, write JSON."""
    seeds = QUICK_SEEDS if options.quick else SEEDS
    grid = compute_grid(BUDGET, GRID)
    third = GRID // 3 - 1  # the grid point at a third of the budget
    with tempfile.TemporaryDirectory(prefix="stalwart-bench-b4-") as tmp:
        started = time.monotonic()
        print(f"{NAME}: Stalwart's searchers, {seeds} seeds ...", flush=True)
        runs = _ours(seeds)
        ours_s = time.monotonic() - started
        print(f"{NAME}: peers ({', '.join(PEERS)}), {seeds} seeds ...", flush=True)
        peers = _peers(seeds, Path(tmp))
        peers_s = time.monotonic() - started - ours_s
    runs.update(peers["runs"])
    summaries = {key: summarize(grid, value["regret"]) for key, value in runs.items()}
    measurements: list[Measurement] = []
    tables = []
    for problem in PROBLEMS:
        for workers in WORKERS:
            key = f"{problem}/{workers}"
            random_final = summaries[f"random/{key}"].mean[-1]
            asha = summaries[f"asha/{key}"]
            reach = compute_to_reach(asha, random_final)
            rows = []
            for algorithm in ("random", "asha", *PEERS):
                s = summaries[f"{algorithm}/{key}"]
                trials = runs[f"{algorithm}/{key}"]["trials"]
                rows.append(
                    (
                        algorithm,
                        _cell(s, third),
                        _cell(s, GRID - 1),
                        _fraction(compute_to_reach(s, random_final)),
                        f"{sum(trials) / len(trials):.0f}",
                        "1.00x" if algorithm == "asha" else f"{s.mean[-1] / asha.mean[-1]:.2f}x",
                    )
                )
            header = (
                "algorithm",
                f"regret @{grid[third]:.0f} ep [95% CI]",
                f"regret @{BUDGET} ep [95% CI]",
                "epochs to random's final (/budget)",
                "trials",
                "final regret / asha",
            )
            tables.append(format_table(f"{NAME} {problem}, {workers} workers", header, rows))
            passed = reach is not None and reach <= COMPUTE_TARGET * BUDGET + 1e-9
            measurements.append(
                Measurement(
                    name=f"asha_compute_to_random_final/{key}",
                    value=None if reach is None else reach / BUDGET,
                    unit="of budget",
                    target="<= 0.33",
                    passed=passed,
                    note=f"random's final mean regret {random_final:.4f}",
                )
            )
            for peer in PEERS:
                p = summaries[f"{peer}/{key}"]
                ok = not_worse(asha, p, third) and not_worse(asha, p, GRID - 1)
                measurements.append(
                    Measurement(
                        name=f"asha_vs_{peer}/{key}",
                        value=asha.mean[-1],
                        unit="regret",
                        target=f"within or below {peer}'s CI",
                        passed=ok,
                        stats={
                            "asha_third": asha.mean[third],
                            "peer_third": [p.mean[third], p.low[third], p.high[third]],
                            "asha_final": asha.mean[-1],
                            "peer_final": [p.mean[-1], p.low[-1], p.high[-1]],
                        },
                        note=f"{peer} {_cell(p, GRID - 1)} at the full budget",
                    )
                )
    print("\n" + "\n\n".join(tables))
    missed = [m.name for m in measurements if m.passed is False]
    print(f"\n{NAME}: {len(measurements) - len(missed)}/{len(measurements)} targets met")
    for name in missed:
        print(f"  missed: {name}")
    setup = {
        "budget_epochs": BUDGET,
        "grid_points": GRID,
        "seeds": seeds,
        "workers": list(WORKERS),
        "problems": list(PROBLEMS),
        "peer_versions": peers["versions"],
        "stalwart_s": ours_s,
        "peers_s": peers_s,
    }
    curves = {key: {"mean": s.mean, "low": s.low, "high": s.high} for key, s in summaries.items()}
    path = write_results(NAME, options, measurements, {"setup": setup, "curves": curves})
    print(f"raw results: {path}")
    return measurements
