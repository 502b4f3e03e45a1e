"""The manifest: packaged content, look-ups, and errors for malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stalwart.environments import DeviceType, Manifest, load_manifest
from stalwart.environments.images import split_image_ref
from stalwart.environments.manifest import MANIFEST_PATH, parse_manifest
from stalwart.errors import ConfigError, ManifestError

EXPECTED: dict[str, tuple[set[str], set[DeviceType]]] = {
    "pytorch-ngc": ({"pytorch"}, {"cpu", "cuda"}),
    "pytorch-ngc-hpc": ({"pytorch"}, {"cpu", "cuda"}),
    "tensorflow-ngc": ({"tensorflow"}, {"cpu", "cuda"}),
    "tensorflow-ngc-hpc": ({"tensorflow"}, {"cpu", "cuda"}),
    "rocm": ({"pytorch", "tensorflow"}, {"rocm"}),
    "pytorch-tensorflow": ({"pytorch", "tensorflow"}, {"cpu", "cuda"}),
    "pytorch-tensorflow-hpc": ({"pytorch", "tensorflow"}, {"cpu", "cuda"}),
    "pytorch2": ({"pytorch"}, {"cpu", "cuda"}),
}


def test_every_family_and_device_is_present(manifest: Manifest) -> None:
    assert set(manifest.families) == set(EXPECTED)
    for name, (frameworks, devices) in EXPECTED.items():
        family = manifest.families[name]
        assert set(family.frameworks) == frameworks, name
        assert set(family.images) == devices, name
        for device in devices:
            ref = manifest.image_ref(name, device)
            assert ref is not None
            assert ref.startswith("determinedai/")


def test_defaults_per_framework_and_device(manifest: Manifest) -> None:
    assert manifest.defaults["pytorch"].family == "pytorch-ngc"
    assert manifest.defaults["tensorflow"].family == "tensorflow-ngc"
    tag = manifest.environments_tag
    assert manifest.default_image("pytorch", "cpu") == (
        "pytorch-ngc",
        f"determinedai/pytorch-ngc-dev:{tag}",
    )
    assert manifest.default_image("pytorch", "cuda") == manifest.default_image("pytorch", "cpu")
    assert manifest.default_image("tensorflow", "cuda") == (
        "tensorflow-ngc",
        f"determinedai/tensorflow-ngc-dev:{tag}",
    )
    # The TF NGC family has no ROCm image: both frameworks fall back to the rocm family.
    assert manifest.default_image("tensorflow", "rocm") == manifest.default_image("pytorch", "rocm")
    assert manifest.default_image("pytorch", "rocm")[0] == "rocm"


def test_rocm_pins_its_own_tag(manifest: Manifest) -> None:
    rocm = manifest.families["rocm"]
    assert not rocm.follows_environments_tag
    assert "determinedai/environments" not in manifest.tracked_repositories()
    assert manifest.tracked_repositories()["determinedai/pytorch-ngc-dev"] == "pytorch-ngc"
    assert manifest.image_ref("rocm", "rocm") == f"determinedai/environments:{rocm.tag}"


def test_ngc_versions(manifest: Manifest) -> None:
    assert manifest.families["pytorch-ngc"].ngc_version == "24.03-py3"
    assert manifest.families["tensorflow-ngc"].ngc_version == "24.03-tf2-py3"
    assert manifest.families["pytorch-tensorflow"].ngc_version is None


def test_determined_0_38_defaults_are_known_images(manifest: Manifest) -> None:
    """Determined 0.38's defaults (and older tags) still map to their families."""
    pt_038 = "determinedai/pytorch-ngc-dev:0736b6d"  # envs-check: ignore
    tf_038 = "determinedai/tensorflow-ngc-dev:0736b6d"  # envs-check: ignore
    pt_033 = "docker.io/determinedai/pytorch-ngc-dev:8b3bea3"  # envs-check: ignore
    assert manifest.family_of(pt_038) == "pytorch-ngc"
    assert manifest.family_of(tf_038) == "tensorflow-ngc"
    assert manifest.family_of(pt_033) == "pytorch-ngc"
    rocm_038 = "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d"
    assert manifest.family_of(rocm_038) == "rocm"
    # A pinned family matches its exact reference only.
    assert manifest.family_of("determinedai/environments:py-3.9-pytorch-1.12-tf-2.11-cpu-x") is None
    assert manifest.family_of("my-registry/custom:latest") is None


def test_rows_cover_every_image(manifest: Manifest) -> None:
    rows = list(manifest.rows())
    assert len(rows) == sum(len(f.images) for f in manifest.families.values())
    assert {r.follows_environments_tag for r in rows if r.family == "rocm"} == {False}


def test_default_manifest_is_cached() -> None:
    assert load_manifest() is load_manifest()
    assert load_manifest(MANIFEST_PATH) == load_manifest()


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("determinedai/some-dev:abc", ("determinedai/some-dev", "abc")),
        ("determinedai/some-dev", ("determinedai/some-dev", None)),
        ("docker.io/determinedai/x:1", ("determinedai/x", "1")),
        ("localhost:5000/team/img:v2", ("localhost:5000/team/img", "v2")),
        ("localhost:5000/team/img", ("localhost:5000/team/img", None)),
        ("team/img@sha256:abcd", ("team/img", None)),
    ],
)
def test_split_image_ref(ref: str, expected: tuple[str, str | None]) -> None:
    assert split_image_ref(ref) == expected


def _doc() -> dict[str, object]:
    data = yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _problems(data: object) -> list[str]:
    with pytest.raises(ManifestError) as info:
        parse_manifest(yaml.safe_dump(data), "test.yaml")
    assert isinstance(info.value, ConfigError)
    assert info.value.code == "invalid_manifest"
    return info.value.problems


def test_malformed_yaml_names_the_line() -> None:
    with pytest.raises(ManifestError, match=r"line 2: not valid YAML: mapping values"):
        parse_manifest("schema_version: 1\nfamilies: a: b\n", "bad.yaml")


def test_not_a_mapping() -> None:
    with pytest.raises(ManifestError, match="mapping"):
        parse_manifest("- a\n", "list.yaml")


def test_unknown_key_is_reported() -> None:
    data = _doc()
    data["extra"] = 1
    assert any(p.startswith("extra:") for p in _problems(data))


def test_unknown_default_family_and_missing_fallback() -> None:
    data = _doc()
    data["defaults"] = {
        "pytorch": {"family": "nope"},
        "tensorflow": {"family": "tensorflow-ngc"},
    }
    problems = _problems(data)
    assert any("defaults.pytorch.family: unknown family 'nope'" in p for p in problems)
    assert any("tensorflow-ngc has no rocm image" in p for p in problems)


def test_default_family_must_hold_the_framework() -> None:
    data = _doc()
    data["defaults"] = {
        "pytorch": {"family": "tensorflow-ngc", "fallback": {"rocm": "rocm"}},
        "tensorflow": {"family": "tensorflow-ngc", "fallback": {"rocm": "rocm"}},
    }
    assert any("does not hold pytorch" in p for p in _problems(data))


def test_bad_tags_and_repositories() -> None:
    data = _doc()
    data["environments_tag"] = "-bad"
    families = data["families"]
    assert isinstance(families, dict)
    families["pytorch2"]["images"]["cpu"] = "determinedai/pytorch-cpu-dev" + ":abc"
    problems = _problems(data)
    assert any(p.startswith("environments_tag:") for p in problems)
    assert any("families.pytorch2.images" in p and "without a tag" in p for p in problems)


def test_repository_in_two_families() -> None:
    data = _doc()
    families = data["families"]
    assert isinstance(families, dict)
    families["pytorch2"]["images"]["cpu"] = "determinedai/pytorch-ngc-dev"
    assert any("also belongs to pytorch-ngc" in p for p in _problems(data))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "absent.yaml")
