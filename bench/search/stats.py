"""Regret statistics over seeds: means, bootstrap confidence intervals, compute to reach a regret.

A *curve* is a list of per-seed regret rows, each on the same compute grid
(:func:`bench.search.sim.regret_on_grid`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CurveSummary", "bootstrap_ci", "compute_to_reach", "summarize"]


@dataclass(frozen=True)
class CurveSummary:
    """Mean regret per grid point over seeds, with a bootstrap CI of the mean."""

    grid: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]
    seeds: int


def bootstrap_ci(
    samples: Sequence[float], *, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``samples`` (deterministic for a given ``seed``)."""
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        raise ValueError("no samples")
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def summarize(grid: Sequence[float], rows: Sequence[Sequence[float]]) -> CurveSummary:
    """Mean and 95% bootstrap CI at every grid point of per-seed regret ``rows``.

    A point where some seed has no regret yet (``inf``) gets ``inf`` for all three values.
    """
    matrix = np.asarray(rows, dtype=float)
    if matrix.ndim != 2 or matrix.shape[1] != len(grid):
        raise ValueError(f"rows must be seeds x {len(grid)} grid points, got {matrix.shape}")
    mean, low, high = [], [], []
    for column in matrix.T:
        if not np.all(np.isfinite(column)):
            mean.append(math.inf)
            low.append(math.inf)
            high.append(math.inf)
            continue
        lo, hi = bootstrap_ci(column.tolist())
        mean.append(float(column.mean()))
        low.append(lo)
        high.append(hi)
    return CurveSummary(list(grid), mean, low, high, int(matrix.shape[0]))


def compute_to_reach(summary: CurveSummary, regret: float) -> float | None:
    """The least grid compute at which the mean regret is at most ``regret`` (None: never)."""
    for point, value in zip(summary.grid, summary.mean, strict=True):
        if value <= regret:
            return point
    return None
