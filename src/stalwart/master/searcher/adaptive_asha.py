"""The ``adaptive_asha`` searcher: several ASHA brackets run side by side (Hyperband-style).

As Determined 0.38's ``adaptive_asha.go`` and ``tournament.go``:

- Rungs per bracket: ``bracket_rungs`` when given; otherwise ``max_rungs`` is first capped at
  ``floor(log_divisor(max_time)) + 1`` and ``floor(log_divisor(max_trials)) + 1``, and ``mode``
  picks the brackets: ``aggressive`` one bracket of ``max_rungs``; ``standard`` the rung counts
  from ``(max_rungs - 1) // 2 + 1`` to ``max_rungs``; ``conservative`` from 1 to ``max_rungs``.
  Brackets are ordered most rungs (most early stopping) first.
- ``max_trials`` is split so every bracket gets about the same training budget: bracket weight
  ``divisor ** (rungs - 1) / rungs``, each bracket ``max(int(weight / total * max_trials), 1)``
  trials, the remainder to the first bracket (so a tiny ``max_trials`` with many brackets can
  create a few more than ``max_trials``, as in Determined).
- ``max_concurrent_trials``: 0 gives every bracket ``max(trials of the last bracket,
  int(divisor))``; otherwise the value is rounded up to the number of brackets and split evenly,
  the remainder to the first brackets. Each bracket then runs at most ``min(its share, its
  trials)`` at once.
- Each bracket is an independent :class:`~stalwart.master.searcher.asha.AshaBracket`; a trial's
  exit makes room in its own bracket. Shutdown comes when every bracket is done.

The floor of a logarithm is computed exactly (``divisor ** k <= n``), where Determined's
``int(math.Log(n) / math.Log(d))`` can fall one short on exact powers (e.g. 1000 with divisor 10).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.asha import AshaBracket, HalvingSearch

__all__ = [
    "AdaptiveASHASearch",
    "bracket_max_concurrent_trials",
    "bracket_max_trials",
    "bracket_rungs",
]

Mode = Literal["aggressive", "standard", "conservative"]


def _floor_log(n: int, base: float) -> int:
    """The largest k with ``base ** k <= n`` (``n >= 1``, ``base > 1``), tolerant of rounding."""
    k, power = 0, base
    while power <= n * (1 + 1e-9):
        k += 1
        power *= base
    return k


def bracket_rungs(
    *,
    mode: Mode,
    max_rungs: int,
    max_time: int,
    max_trials: int,
    divisor: float,
    explicit: Sequence[int] = (),
) -> list[int]:
    """Rungs of each bracket, most rungs first."""
    if explicit:
        if any(r < 1 for r in explicit):
            raise ValueError(f"bracket_rungs must all be >= 1, got {list(explicit)}")
        return sorted(explicit, reverse=True)
    top = min(max_rungs, _floor_log(max_time, divisor) + 1, _floor_log(max_trials, divisor) + 1)
    if mode == "aggressive":
        rungs = [top]
    elif mode == "standard":
        rungs = list(range((top - 1) // 2 + 1, top + 1))
    else:
        rungs = list(range(1, top + 1))
    return sorted(rungs, reverse=True)


def bracket_max_trials(max_trials: int, divisor: float, rungs: Sequence[int]) -> list[int]:
    """Trials per bracket, for about equal training budget per bracket."""
    logs = [(r - 1) * math.log(divisor) - math.log(r) for r in rungs]
    try:
        weights = [divisor ** (r - 1) / r for r in rungs]
        if not all(math.isfinite(w) for w in weights):
            raise OverflowError
    except OverflowError:
        top = max(logs)
        weights = [math.exp(lw - top) for lw in logs]
    total = sum(weights)
    trials = [max(int(w / total * max_trials), 1) for w in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


def bracket_max_concurrent_trials(
    max_concurrent_trials: int, divisor: float, trials: Sequence[int]
) -> list[int]:
    """Concurrency share of each bracket (Determined's rounding)."""
    n = len(trials)
    if max_concurrent_trials == 0:
        return [max(trials[-1], int(divisor))] * n
    total = max(max_concurrent_trials, n)
    share, remainder = divmod(total, n)
    return [share + (1 if i < remainder else 0) for i in range(n)]


class AdaptiveASHASearch(HalvingSearch):
    """``adaptive_asha``: ASHA brackets with different amounts of early stopping."""

    name = "adaptive_asha"

    def __init__(
        self,
        hyperparameters: Mapping[str, Hyperparameter],
        seed: int,
        *,
        metric: str,
        smaller_is_better: bool,
        time_metric: str,
        max_time: int,
        max_trials: int,
        max_concurrent_trials: int,
        divisor: float = 4.0,
        mode: Mode = "standard",
        max_rungs: int = 5,
        explicit_bracket_rungs: Sequence[int] = (),
    ) -> None:
        rungs = bracket_rungs(
            mode=mode,
            max_rungs=max_rungs,
            max_time=max_time,
            max_trials=max_trials,
            divisor=divisor,
            explicit=explicit_bracket_rungs,
        )
        trials = bracket_max_trials(max_trials, divisor, rungs)
        shares = bracket_max_concurrent_trials(max_concurrent_trials, divisor, trials)
        brackets = [
            AshaBracket(
                num_rungs=r,
                divisor=divisor,
                max_time=max_time,
                max_trials=t,
                max_concurrent_trials=c,
            )
            for r, t, c in zip(rungs, trials, shares, strict=True)
        ]
        super().__init__(
            hyperparameters,
            seed,
            metric=metric,
            smaller_is_better=smaller_is_better,
            time_metric=time_metric,
            max_time=max_time,
            brackets=brackets,
        )
