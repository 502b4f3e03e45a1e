"""Hyperparameter sampling and grids, with a seeded generator whose state is plain data.

- :class:`SearchRandom` is the searcher's only source of randomness: xoshiro256** seeded through
  splitmix64 from the experiment seed. Its state is four integers, so a snapshot carries it and a
  restored searcher draws exactly the samples it would have drawn. Nothing here reads the clock
  or the global :mod:`random` state, and the stream does not depend on the Python version.
- :func:`sample_hyperparameters` draws one configuration (Determined's ``sampleAll``):
  ``int`` uniform over ``[minval, maxval]`` inclusive, ``double`` uniform over ``[minval, maxval]``,
  ``log`` ``base ** uniform(minval, maxval)``, ``categorical`` a uniform choice, ``const`` its
  value, nested groups recursively. Names are visited in sorted order (as Determined's ``Each``),
  so the draws do not depend on the order of keys in the stored config.
- :class:`GridSpace` / :func:`grid_points` is the grid searcher's cartesian product (Determined's
  ``grid.go``), indexable so a huge grid is never built in memory.
"""

from __future__ import annotations

import copy
import math
import uuid
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

from stalwart.config.hyperparameters import (
    CategoricalHyperparameter,
    ConstHyperparameter,
    DoubleHyperparameter,
    Hyperparameter,
    IntHyperparameter,
    LogHyperparameter,
)

__all__ = [
    "TRIAL_SEED_BOUND",
    "GridSpace",
    "SearchRandom",
    "grid_axis",
    "grid_points",
    "sample_hyperparameters",
]

TRIAL_SEED_BOUND = 2**31
"""Trial seeds are drawn from ``[0, TRIAL_SEED_BOUND)`` (Determined: ``Int64n(1 << 31)``)."""

_M64 = (1 << 64) - 1


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & _M64


class SearchRandom:
    """A small, seedable, serializable pseudo-random generator (xoshiro256**)."""

    def __init__(self, seed: int) -> None:
        x = seed & _M64
        words = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & _M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
            words.append(z ^ (z >> 31))
        self._s = words

    def state(self) -> list[int]:
        """The generator state (four 64-bit integers), for a snapshot."""
        return list(self._s)

    @classmethod
    def from_state(cls, state: Sequence[int]) -> SearchRandom:
        """A generator that continues from :meth:`state`."""
        if len(state) != 4 or not all(isinstance(w, int) and 0 <= w <= _M64 for w in state):
            raise ValueError("a SearchRandom state is four 64-bit unsigned integers")
        rng = cls(0)
        rng._s = list(state)
        return rng

    def bits64(self) -> int:
        """64 random bits."""
        s = self._s
        result = (_rotl((s[1] * 5) & _M64, 7) * 9) & _M64
        t = (s[1] << 17) & _M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def bits(self, k: int) -> int:
        """``k`` random bits (any ``k >= 0``)."""
        value, have = 0, 0
        while have < k:
            value = (value << 64) | self.bits64()
            have += 64
        return value >> (have - k)

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` (``n >= 1``), without modulo bias."""
        if n < 1:
            raise ValueError(f"below() needs n >= 1, got {n}")
        k = (n - 1).bit_length()
        while True:
            r = self.bits(k)
            if r < n:
                return r

    def random(self) -> float:
        """A uniform float in ``[0, 1)`` with 53 random bits."""
        return (self.bits64() >> 11) * 2.0**-53

    def uniform(self, low: float, high: float) -> float:
        """A uniform float in ``[low, high]`` (``low <= high``, both finite)."""
        u = self.random()
        span = high - low
        value = low + span * u if math.isfinite(span) else low * (1.0 - u) + high * u
        return min(max(value, low), high)

    def trial_seed(self) -> int:
        """A trial seed in ``[0, 2**31)``."""
        return self.below(TRIAL_SEED_BOUND)

    def request_id(self) -> str:
        """A request id: a version-4 UUID built from 128 random bits."""
        return str(uuid.UUID(int=self.bits(128), version=4))


def _hp_label(path: Sequence[str]) -> str:
    return ".".join(path) or "<hyperparameters>"


def _log_value(base: float, exponent: float, path: Sequence[str]) -> float:
    try:
        value = math.pow(base, exponent)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(
            f"hyperparameter {_hp_label(path)}: {base} ** {exponent} is out of the float range"
        )
    return value


def _sample_one(hp: Hyperparameter, rng: SearchRandom, path: tuple[str, ...]) -> Any:
    if isinstance(hp, ConstHyperparameter):
        return copy.deepcopy(hp.val)
    if isinstance(hp, IntHyperparameter):
        return hp.minval + rng.below(hp.maxval - hp.minval + 1)
    if isinstance(hp, DoubleHyperparameter):
        return rng.uniform(hp.minval, hp.maxval)
    if isinstance(hp, LogHyperparameter):
        return _log_value(hp.base, rng.uniform(hp.minval, hp.maxval), path)
    if isinstance(hp, CategoricalHyperparameter):
        return copy.deepcopy(hp.vals[rng.below(len(hp.vals))])
    return _sample_group(hp, rng, path)


def _sample_group(
    hps: Mapping[str, Hyperparameter], rng: SearchRandom, path: tuple[str, ...]
) -> dict[str, Any]:
    drawn = {name: _sample_one(hps[name], rng, (*path, name)) for name in sorted(hps)}
    return {name: drawn[name] for name in hps}  # the config's key order, for readability


def sample_hyperparameters(hps: Mapping[str, Hyperparameter], rng: SearchRandom) -> dict[str, Any]:
    """One sampled configuration: names to values, nested groups as nested dicts.

    Raises ValueError when a ``log`` hyperparameter's value is not a finite float.
    """
    return _sample_group(hps, rng, ())


def _round_half_away(value: Fraction) -> int:
    """Round to the nearest integer, halves away from zero (Go's ``math.Round``)."""
    magnitude = math.floor(abs(value) + Fraction(1, 2))
    return magnitude if value >= 0 else -magnitude


def grid_axis(hp: Hyperparameter, path: Sequence[str] = ()) -> list[Any]:
    """The values one (non-nested) hyperparameter takes in a grid search.

    ``count`` evenly spaced points from ``minval`` to ``maxval`` (both included exactly; one point
    is the midpoint). ``int``: the count is capped at the number of integers in the range, points
    are rounded half away from zero and deduplicated. ``log``: ``base ** x`` over the exponents.
    ``categorical``: every value; ``const``: its value. Raises ValueError for a numeric
    hyperparameter without ``count`` (the config check rejects those first).
    """
    if isinstance(hp, ConstHyperparameter):
        return [copy.deepcopy(hp.val)]
    if isinstance(hp, CategoricalHyperparameter):
        return copy.deepcopy(list(hp.vals))
    if not isinstance(hp, IntHyperparameter | DoubleHyperparameter | LogHyperparameter):
        raise TypeError(f"hyperparameter {_hp_label(path)}: a nested group has no single axis")
    if hp.count is None:
        raise ValueError(f"hyperparameter {_hp_label(path)}: the grid searcher needs 'count'")
    if isinstance(hp, IntHyperparameter):
        lo, hi = hp.minval, hp.maxval
        count = min(hp.count, hi - lo + 1)
        if count == 1:
            return [_round_half_away(Fraction(lo + hi, 2))]
        points = [_round_half_away(lo + Fraction(i * (hi - lo), count - 1)) for i in range(count)]
        return list(dict.fromkeys(points))
    lo_f, hi_f, count = hp.minval, hp.maxval, hp.count
    if count == 1:
        xs = [(lo_f + hi_f) / 2.0]
    else:
        step = (hi_f - lo_f) / (count - 1)
        if math.isfinite(step):
            xs = [min(lo_f + i * step, hi_f) for i in range(count - 1)]
        else:  # a range wider than the float range: interpolate without overflow
            xs = [lo_f * (1 - i / (count - 1)) + hi_f * (i / (count - 1)) for i in range(count - 1)]
        xs.append(hi_f)
    if isinstance(hp, LogHyperparameter):
        return [_log_value(hp.base, x, path) for x in xs]
    return xs


def _axes(
    hps: Mapping[str, Hyperparameter], path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], list[Any]]]:
    axes: list[tuple[tuple[str, ...], list[Any]]] = []
    for name in sorted(hps):
        hp = hps[name]
        if isinstance(hp, dict):
            axes.extend(_axes(hp, (*path, name)))
        else:
            axes.append(((*path, name), grid_axis(hp, (*path, name))))
    return axes


def _skeleton(hps: Mapping[str, Hyperparameter]) -> dict[str, Any]:
    """Empty nested dicts in the config's key order (so empty groups stay present)."""
    return {name: _skeleton(hp) for name, hp in hps.items() if isinstance(hp, dict)}


def _place(sample: dict[str, Any], route: tuple[str, ...], value: Any) -> None:
    for key in route[:-1]:
        sample = sample[key]
    sample[route[-1]] = value


def _ordered_like(hps: Mapping[str, Hyperparameter], sample: dict[str, Any]) -> dict[str, Any]:
    return {
        name: _ordered_like(hp, sample[name]) if isinstance(hp, dict) else sample[name]
        for name, hp in hps.items()
    }


class GridSpace:
    """The grid of a grid search, indexable without building every point.

    Points are in cartesian-product order: names sorted (nested groups contribute one axis per
    leaf, in sorted order), the first axis varying slowest. With no hyperparameters the grid is
    one empty point (one trial; Determined would create none and never finish).
    """

    def __init__(self, hps: Mapping[str, Hyperparameter]) -> None:
        self._hps = hps
        self._axes = _axes(hps, ())
        self._size = math.prod(len(values) for _, values in self._axes)

    def __len__(self) -> int:
        return self._size

    def point(self, index: int) -> dict[str, Any]:
        """The ``index``-th point (``0 <= index < len(self)``)."""
        if not 0 <= index < self._size:
            raise IndexError(f"grid point {index} out of range (the grid has {self._size})")
        sample = _skeleton(self._hps)
        for route, values in reversed(self._axes):
            index, digit = divmod(index, len(values))
            _place(sample, route, copy.deepcopy(values[digit]))
        return _ordered_like(self._hps, sample)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self.point(i) for i in range(self._size))


def grid_points(hps: Mapping[str, Hyperparameter]) -> list[dict[str, Any]]:
    """Every point of the grid, in :class:`GridSpace` order."""
    return list(GridSpace(hps))
