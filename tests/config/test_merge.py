"""Merging config layers: first non-null wins, with Determined's special rules."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from stalwart.config import DefaultsLayers, merge_experiment_layers
from stalwart.config.merge import merge, merge_layers, normalize_device_map, tcd_to_experiment_layer


def test_first_non_null_wins_and_maps_merge_key_by_key() -> None:
    exp = {"name": "exp", "description": None, "resources": {"slots_per_trial": 2}}
    tpl = {"name": "tpl", "description": "from template", "resources": {"max_slots": 8}}
    merged = merge_layers(exp, tpl)
    assert merged["name"] == "exp"
    assert merged["description"] == "from template"
    assert merged["resources"] == {"slots_per_trial": 2, "max_slots": 8}


def test_lists_are_taken_whole() -> None:
    assert merge_layers({"labels": ["a"]}, {"labels": ["b", "c"]})["labels"] == ["a"]


def test_checkpoint_storage_of_another_type_wins_whole() -> None:
    exp = {"checkpoint_storage": {"type": "s3", "bucket": "b"}}
    master = {"checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp"}}
    assert merge_layers(exp, master)["checkpoint_storage"] == {"type": "s3", "bucket": "b"}


def test_checkpoint_storage_of_the_same_type_merges() -> None:
    exp = {"checkpoint_storage": {"type": "shared_fs", "save_trial_best": 3}}
    master = {"checkpoint_storage": {"type": "shared_fs", "host_path": "/data"}}
    assert merge_layers(exp, master)["checkpoint_storage"] == {
        "type": "shared_fs",
        "save_trial_best": 3,
        "host_path": "/data",
    }


def test_image_string_covers_every_device_and_gpu_means_cuda() -> None:
    exp = {"environment": {"image": {"gpu": "my/cuda:1"}}}
    tcd = {"environment": {"image": "site/default:2"}}
    assert merge_layers(exp, tcd)["environment"]["image"] == {
        "cuda": "my/cuda:1",
        "cpu": "site/default:2",
        "rocm": "site/default:2",
    }
    assert normalize_device_map({"gpu": "g", "cuda": "c"}) == {"cuda": "c"}


def test_environment_variables_keep_both_layers_first_layer_last() -> None:
    exp = {"environment": {"environment_variables": ["A=exp"]}}
    tcd = {"environment": {"environment_variables": {"cpu": ["A=tcd", "B=1"]}}}
    env = merge_layers(exp, tcd)["environment"]["environment_variables"]
    assert env["cpu"] == ["A=tcd", "B=1", "A=exp"]
    assert env["cuda"] == ["A=exp"]


def test_bind_mounts_union_by_container_path() -> None:
    exp = {"bind_mounts": [{"host_path": "/mine", "container_path": "/data"}]}
    tcd = {
        "bind_mounts": [
            {"host_path": "/site", "container_path": "/data"},
            {"host_path": "/cache", "container_path": "/cache"},
        ]
    }
    assert [m["host_path"] for m in merge_layers(exp, tcd)["bind_mounts"]] == ["/mine", "/cache"]


def test_sbatch_args_are_prepended() -> None:
    exp = {"slurm": {"sbatch_args": ["--time=1:00:00"]}}
    tcd = {"slurm": {"sbatch_args": ["--account=ml"], "gpu_type": "a100"}}
    assert merge_layers(exp, tcd)["slurm"] == {
        "sbatch_args": ["--account=ml", "--time=1:00:00"],
        "gpu_type": "a100",
    }


def test_log_policies_union_by_name() -> None:
    exp = {"log_policies": [{"name": "oom", "pattern": "mine"}]}
    tcd = {"log_policies": [{"name": "oom", "pattern": "site"}, {"name": "ecc", "pattern": "e"}]}
    assert merge_layers(exp, tcd)["log_policies"] == [
        {"name": "oom", "pattern": "mine"},
        {"name": "ecc", "pattern": "e"},
    ]


def test_typed_hyperparameters_are_atomic_groups_merge() -> None:
    exp = {"hyperparameters": {"lr": 0.1, "opt": {"m": 0.9}}}
    tpl = {
        "hyperparameters": {
            "lr": {"type": "double", "minval": 0.0, "maxval": 1.0},
            "opt": {"nesterov": True},
        }
    }
    assert merge_layers(exp, tpl)["hyperparameters"] == {
        "lr": 0.1,
        "opt": {"m": 0.9, "nesterov": True},
    }


def test_task_container_defaults_map_into_the_experiment() -> None:
    tcd = {
        "image": {"cpu": "c", "cuda": "g"},
        "shm_size_bytes": 1024,
        "cpu_pod_spec": {"spec": "cpu"},
        "gpu_pod_spec": {"spec": "gpu"},
        "network_mode": "host",
    }
    layer = tcd_to_experiment_layer(tcd, gpu=False)
    assert layer == {
        "environment": {"image": {"cpu": "c", "cuda": "g"}, "pod_spec": {"spec": "cpu"}},
        "resources": {"shm_size": 1024},
    }
    assert tcd_to_experiment_layer(tcd, gpu=True)["environment"]["pod_spec"] == {"spec": "gpu"}


def test_precedence_experiment_template_pool_master() -> None:
    merged = merge_experiment_layers(
        {"environment": {"image": {"cpu": "exp"}}},
        DefaultsLayers(
            template={"environment": {"image": {"cpu": "tpl", "cuda": "tpl"}}},
            pool_tcd={"image": {"cuda": "pool", "rocm": "pool"}},
            master_tcd={"image": "master", "force_pull_image": True},
            checkpoint_storage={"type": "shared_fs", "host_path": "/ckpt"},
        ),
    )
    assert merged["environment"]["image"] == {"cpu": "exp", "cuda": "tpl", "rocm": "pool"}
    assert merged["environment"]["force_pull_image"] is True
    assert merged["checkpoint_storage"] == {"type": "shared_fs", "host_path": "/ckpt"}


def test_zero_slot_experiments_take_the_cpu_pod_spec() -> None:
    merged = merge_experiment_layers(
        {"resources": {"slots_per_trial": 0}},
        DefaultsLayers(master_tcd={"cpu_pod_spec": {"a": 1}, "gpu_pod_spec": {"b": 2}}),
    )
    assert merged["environment"]["pod_spec"] == {"a": 1}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from("abc"), children, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values)
def test_merging_with_nothing_changes_nothing(value: Any) -> None:
    assert merge(value, None) == value


@given(st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4))
def test_merging_a_layer_with_itself_is_identity(layer: dict[str, Any]) -> None:
    assert merge(layer, layer) == layer


@given(
    st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4),
    st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4),
)
def test_first_layer_non_null_scalars_always_survive(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    merged = merge(first, second)
    for key, value in first.items():
        if value is not None and not isinstance(value, dict):
            assert merged[key] == value


def test_default_log_policies_merge_by_name() -> None:
    def names(exp: dict[str, Any]) -> list[str]:
        return [p["name"] for p in merge_experiment_layers(exp)["log_policies"]]

    assert names({}) == ["CUDA OOM", "ECC Error"]
    mine = {
        "log_policies": [{"name": "NaN", "pattern": ".*nan loss.*", "action": "cancel_retries"}]
    }
    assert names(mine) == ["NaN", "CUDA OOM", "ECC Error"]
    assert names({"log_policies": [{"name": "CUDA OOM", "pattern": None}]}) == ["ECC Error"]
    assert names({"log_policies": []}) == []
