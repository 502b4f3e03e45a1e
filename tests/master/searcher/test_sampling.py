"""Sampling and grids: bounds, types, determinism, nested groups."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.config.hyperparameters import (
    CategoricalHyperparameter,
    ConstHyperparameter,
    DoubleHyperparameter,
    Hyperparameter,
    IntHyperparameter,
    LogHyperparameter,
)
from stalwart.master.searcher.sampling import (
    GridSpace,
    SearchRandom,
    grid_axis,
    grid_points,
    sample_hyperparameters,
)
from tests.master.searcher.sim import make_config

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-100, 100) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


@st.composite
def int_hp(draw: st.DrawFn) -> dict[str, Any]:
    lo = draw(st.integers(-(10**12), 10**12))
    hi = draw(st.integers(lo + 1, lo + draw(st.sampled_from([1, 5, 100, 10**15]))))
    return {"type": "int", "minval": lo, "maxval": hi, "count": draw(st.integers(1, 12))}


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def double_hp(draw: st.DrawFn) -> dict[str, Any]:
    lo = draw(finite)
    hi = draw(finite.filter(lambda x: x > lo))
    return {"type": "double", "minval": lo, "maxval": hi, "count": draw(st.integers(1, 12))}


@st.composite
def log_hp(draw: st.DrawFn) -> dict[str, Any]:
    lo = draw(st.floats(-10, 10))
    hi = draw(st.floats(-10, 10).filter(lambda x: x > lo))
    base = draw(st.sampled_from([10.0, 2.0, math.e, 0.5]))
    return {
        "type": "log",
        "minval": lo,
        "maxval": hi,
        "base": base,
        "count": draw(st.integers(1, 6)),
    }


categorical = st.builds(
    lambda vals: {"type": "categorical", "vals": vals},
    st.lists(json_values, min_size=1, max_size=4),
)
const = st.one_of(
    st.builds(lambda v: {"type": "const", "val": v}, json_values),
    st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
)
leaf = st.one_of(int_hp(), double_hp(), log_hp(), categorical, const)
names = st.text("abcxyz_", min_size=1, max_size=4)
hyperparameters = st.dictionaries(
    names,
    st.recursive(
        leaf, lambda inner: st.dictionaries(names, inner, min_size=1, max_size=3), max_leaves=6
    ),
    max_size=4,
)


def validated(raw: dict[str, Any], searcher: str = "random") -> Mapping[str, Hyperparameter]:
    spec: dict[str, Any] = {"name": searcher, "metric": "loss"}
    if searcher == "random":
        spec["max_trials"] = 1
    hps: Mapping[str, Hyperparameter] = make_config(spec, raw).hyperparameters
    return hps


def check_sample(hps: Mapping[str, Hyperparameter], sample: Any) -> None:
    assert isinstance(sample, dict)
    assert list(sample) == list(hps)
    for name, hp in hps.items():
        value = sample[name]
        if isinstance(hp, dict):
            check_sample(hp, value)
        elif isinstance(hp, IntHyperparameter):
            assert type(value) is int
            assert hp.minval <= value <= hp.maxval
        elif isinstance(hp, DoubleHyperparameter):
            assert type(value) is float
            assert hp.minval <= value <= hp.maxval
        elif isinstance(hp, LogHyperparameter):
            assert type(value) is float
            ends = sorted([hp.base**hp.minval, hp.base**hp.maxval])
            assert ends[0] * (1 - 1e-9) <= value <= ends[1] * (1 + 1e-9)
        elif isinstance(hp, CategoricalHyperparameter):
            assert value in hp.vals
        else:
            assert isinstance(hp, ConstHyperparameter)
            assert value == hp.val


@settings(max_examples=150, deadline=None)
@given(hyperparameters, st.integers(0, 2**32 - 1))
def test_samples_respect_bounds_types_and_nesting(raw: dict[str, Any], seed: int) -> None:
    hps = validated(raw)
    rng = SearchRandom(seed)
    for _ in range(3):
        check_sample(hps, sample_hyperparameters(hps, rng))


@settings(max_examples=50, deadline=None)
@given(hyperparameters, st.integers(0, 2**32 - 1))
def test_sampling_is_deterministic_and_resumable(raw: dict[str, Any], seed: int) -> None:
    hps = validated(raw)
    a, b = SearchRandom(seed), SearchRandom(seed)
    assert sample_hyperparameters(hps, a) == sample_hyperparameters(hps, b)
    resumed = SearchRandom.from_state(a.state())
    assert [sample_hyperparameters(hps, a) for _ in range(3)] == [
        sample_hyperparameters(hps, resumed) for _ in range(3)
    ]


def test_sampling_does_not_depend_on_key_order() -> None:
    raw = {
        "b": {"type": "int", "minval": 0, "maxval": 99},
        "a": {"type": "double", "minval": 0, "maxval": 1},
    }
    one = sample_hyperparameters(validated(raw), SearchRandom(7))
    two = sample_hyperparameters(validated(dict(reversed(raw.items()))), SearchRandom(7))
    assert one == two
    assert list(one) == ["b", "a"]


def test_int_sampling_reaches_both_ends_and_is_uniform() -> None:
    hps = validated({"x": {"type": "int", "minval": 1, "maxval": 4}})
    rng = SearchRandom(3)
    counts = dict.fromkeys(range(1, 5), 0)
    for _ in range(4000):
        counts[sample_hyperparameters(hps, rng)["x"]] += 1
    assert all(850 < c < 1150 for c in counts.values()), counts


def test_const_values_are_copies() -> None:
    hps = validated({"layers": [64, 32], "opt": {"type": "categorical", "vals": [{"name": "sgd"}]}})
    first = sample_hyperparameters(hps, SearchRandom(0))
    first["layers"].append(1)
    first["opt"]["name"] = "changed"
    assert sample_hyperparameters(hps, SearchRandom(0)) == {
        "layers": [64, 32],
        "opt": {"name": "sgd"},
    }


def test_random_generator_basics() -> None:
    rng = SearchRandom(0)
    assert all(0 <= rng.below(10) < 10 for _ in range(100))
    assert rng.below(1) == 0
    big = 10**30
    assert all(0 <= rng.below(big) < big for _ in range(50))
    assert all(0 <= rng.trial_seed() < 2**31 for _ in range(100))
    ids = {rng.request_id() for _ in range(100)}
    assert len(ids) == 100
    assert SearchRandom(1).state() != SearchRandom(2).state()
    with pytest.raises(ValueError, match="four"):
        SearchRandom.from_state([1, 2, 3])
    with pytest.raises(ValueError, match="n >= 1"):
        rng.below(0)


def test_log_overflow_is_a_clear_error() -> None:
    hps = validated({"lr": {"type": "log", "minval": 400, "maxval": 500}})
    with pytest.raises(ValueError, match="lr"):
        sample_hyperparameters(hps, SearchRandom(0))


# -- grids ------------------------------------------------------------------------------------


def axis(raw: dict[str, Any]) -> list[Any]:
    hp = validated({"x": raw}, "grid")["x"]
    assert not isinstance(hp, dict)
    return grid_axis(hp)


def test_grid_axes_examples() -> None:
    assert axis({"type": "int", "minval": 1, "maxval": 10, "count": 4}) == [1, 4, 7, 10]
    assert axis({"type": "int", "minval": 1, "maxval": 4, "count": 10}) == [1, 2, 3, 4]
    assert axis({"type": "int", "minval": 0, "maxval": 5, "count": 3}) == [0, 3, 5]  # 2.5 -> 3
    assert axis({"type": "int", "minval": -5, "maxval": 0, "count": 3}) == [-5, -3, 0]  # -2.5 -> -3
    assert axis({"type": "int", "minval": 1, "maxval": 4, "count": 1}) == [3]
    assert axis({"type": "double", "minval": 0, "maxval": 1, "count": 5}) == [0, 0.25, 0.5, 0.75, 1]
    assert axis({"type": "double", "minval": 0, "maxval": 1, "count": 1}) == [0.5]
    assert axis({"type": "log", "minval": -3, "maxval": -1, "count": 3}) == pytest.approx(
        [1e-3, 1e-2, 1e-1]
    )
    assert axis({"type": "log", "minval": 1, "maxval": 3, "base": 2, "count": 1}) == [4.0]
    assert axis({"type": "categorical", "vals": ["a", 1, None]}) == ["a", 1, None]
    assert axis({"type": "const", "val": [1]}) == [[1]]


def test_grid_of_nested_groups() -> None:
    hps = validated(
        {
            "opt": {"name": {"type": "categorical", "vals": ["sgd", "adam"]}, "momentum": 0.9},
            "layers": {"type": "int", "minval": 1, "maxval": 2, "count": 2},
        },
        "grid",
    )
    points = grid_points(hps)
    assert points == [
        {"opt": {"name": n, "momentum": 0.9}, "layers": layers}
        for layers in (1, 2)
        for n in ("sgd", "adam")
    ]
    assert list(points[0]) == ["opt", "layers"]


def test_empty_grid_is_one_point() -> None:
    assert grid_points({}) == [{}]
    assert grid_points(validated({"g": {}}, "grid")) == [{"g": {}}]


def leaves(hps: Mapping[str, Hyperparameter]) -> list[Hyperparameter]:
    out: list[Hyperparameter] = []
    for name in sorted(hps):
        hp = hps[name]
        out.extend(leaves(hp) if isinstance(hp, dict) else [hp])
    return out


@settings(max_examples=100, deadline=None)
@given(hyperparameters)
def test_grid_is_the_full_cartesian_product(raw: dict[str, Any]) -> None:
    hps = validated(raw, "grid")
    axes = [grid_axis(hp) for hp in leaves(hps)]
    for hp, values in zip(leaves(hps), axes, strict=True):
        if isinstance(hp, IntHyperparameter):
            assert all(type(v) is int and hp.minval <= v <= hp.maxval for v in values)
            assert values == sorted(set(values))
            assert len(values) == min(hp.count or 0, hp.maxval - hp.minval + 1)
            if len(values) > 1:
                assert (values[0], values[-1]) == (hp.minval, hp.maxval)
        elif isinstance(hp, DoubleHyperparameter):
            assert len(values) == hp.count
            assert all(hp.minval <= v <= hp.maxval for v in values)
    space = GridSpace(hps)
    assert len(space) == math.prod(len(a) for a in axes)
    if len(space) <= 2000:
        points = list(space)
        for point in points[:50]:
            check_sample(hps, point)
        index = len(points) - 1
        assert space.point(index) == points[-1]
