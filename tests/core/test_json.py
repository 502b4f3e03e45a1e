"""jsonable: wire JSON from user values."""

from __future__ import annotations

import math
from typing import Any

import pytest

from stalwart.core._json import dumps, jsonable


class Scalar:
    """Quacks like a numpy/torch scalar."""

    size = 1

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


class Array:
    """Quacks like a numpy array of several elements."""

    size = 2

    def item(self) -> float:
        raise ValueError("can only convert an array of size 1")

    def tolist(self) -> list[float]:
        return [1.0, 2.0]


def test_plain_values_and_non_finite_floats() -> None:
    value: dict[str, Any] = {
        "a": 1,
        "b": [math.nan, math.inf, -math.inf],
        "c": (True, None, "s"),
        "d": {"e": 0.5},
    }
    assert jsonable(value) == {
        "a": 1,
        "b": ["NaN", "Infinity", "-Infinity"],
        "c": [True, None, "s"],
        "d": {"e": 0.5},
    }
    assert dumps(jsonable(value)).startswith(b'{"a":1,"b":["NaN"')


def test_array_library_values() -> None:
    assert jsonable({"x": Scalar(2.5), "y": Array(), "z": Scalar(math.nan)}) == {
        "x": 2.5,
        "y": [1.0, 2.0],
        "z": "NaN",
    }


def test_errors_name_the_place() -> None:
    with pytest.raises(TypeError, match=r"metrics\['m'\]\[1\] is a set"):
        jsonable({"m": [1, {2}]}, "metrics")
    with pytest.raises(TypeError, match="key 1 that is not a string"):
        jsonable({1: 2}, "metrics")
    with pytest.raises(ValueError, match="Out of range float"):
        dumps(math.nan)
