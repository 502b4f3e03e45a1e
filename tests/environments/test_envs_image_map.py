"""image_map: Determined's raw ``image`` forms, normalized per device; device_for_slots."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stalwart.environments import DEVICE_TYPES, device_for_slots, image_map
from stalwart.errors import EnvironmentResolutionError, ImageSpecError

names = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")
values = st.one_of(st.none(), st.just(""), st.just("   "), names)


def test_string_applies_to_every_device() -> None:
    assert image_map("img:1") == {"cpu": "img:1", "cuda": "img:1", "rocm": "img:1"}


def test_map_takes_each_device() -> None:
    assert image_map({"cpu": "a", "cuda": "b", "rocm": "c"}) == {
        "cpu": "a",
        "cuda": "b",
        "rocm": "c",
    }


def test_gpu_is_an_alias_for_cuda() -> None:
    assert image_map({"cpu": "a", "gpu": "g"}) == {"cpu": "a", "cuda": "g", "rocm": None}


def test_cuda_wins_over_gpu() -> None:
    assert image_map({"cuda": "c", "gpu": "g"})["cuda"] == "c"


def test_empty_string_counts_as_unset() -> None:
    assert image_map("") == dict.fromkeys(DEVICE_TYPES)
    assert image_map({"cpu": "", "cuda": "", "gpu": "g"}) == {
        "cpu": None,
        "cuda": "g",
        "rocm": None,
    }


def test_none_means_nothing_set() -> None:
    assert image_map(None) == {"cpu": None, "cuda": None, "rocm": None}
    assert image_map({"cpu": None}) == {"cpu": None, "cuda": None, "rocm": None}


def test_unknown_key_is_an_error_and_a_value_error() -> None:
    with pytest.raises(ImageSpecError, match=r"unknown key.*tpu") as info:
        image_map({"tpu": "x"})
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, EnvironmentResolutionError)


@pytest.mark.parametrize("value", [3, ["a"], {"cpu": 3}])
def test_wrong_shapes_are_errors(value: object) -> None:
    with pytest.raises(ImageSpecError):
        image_map(value)


@given(names)
def test_a_nonblank_string_is_every_devices_image(name: str) -> None:
    assert image_map(name) == dict.fromkeys(DEVICE_TYPES, name)


@given(st.fixed_dictionaries({}, optional=dict.fromkeys(("cpu", "cuda", "gpu", "rocm"), values)))
def test_map_invariants(raw: dict[str, str | None]) -> None:
    result = image_map(raw)
    assert set(result) == set(DEVICE_TYPES)
    assert all(v is None or v.strip() for v in result.values())

    def given_value(key: str) -> str | None:
        v = raw.get(key)
        return v if v is not None and v.strip() else None

    assert result["cpu"] == given_value("cpu")
    assert result["rocm"] == given_value("rocm")
    assert result["cuda"] == (given_value("cuda") or given_value("gpu"))


def test_device_for_slots() -> None:
    assert device_for_slots(0, "cuda") == "cpu"
    assert device_for_slots(0, "rocm") == "cpu"
    assert device_for_slots(2, "cuda") == "cuda"
    assert device_for_slots(1, "rocm") == "rocm"
    with pytest.raises(ValueError, match="slots"):
        device_for_slots(-1, "cuda")
