"""Tests of the experiment-config section models against Determined 0.38's expconf v0.

Expected defaults and accepted/refused inputs follow Determined's schemas and its schema test
cases (``schemas/test_cases/v0``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from stalwart.config import (
    environment,
    hpc,
    integrations,
    legacy,
    policies,
    resources,
    sections,
    storage,
    task_container_defaults,
)
from stalwart.config.environment import EnvironmentConfig, EnvironmentImage, EnvironmentVariables
from stalwart.config.hpc import PbsConfig, SlurmConfig
from stalwart.config.integrations import IntegrationsConfig
from stalwart.config.legacy import DataLayerConfig, SecurityConfig
from stalwart.config.policies import (
    DEFAULT_LOG_POLICIES,
    LogPolicies,
    LogPolicy,
    RetentionPolicyConfig,
)
from stalwart.config.resources import Device, ResourcesConfig
from stalwart.config.sections import (
    BindMount,
    Length,
    OptimizationsConfig,
    PositiveLength,
    ProfilingConfig,
    ReproducibilityConfig,
)
from stalwart.config.storage import STORAGE_TYPES, CheckpointStorageConfig
from stalwart.config.task_container_defaults import TaskContainerDefaults

STORAGE = TypeAdapter[Any](CheckpointStorageConfig)
LOG_POLICIES = TypeAdapter[Any](LogPolicies)
DATA_LAYER = TypeAdapter[Any](DataLayerConfig)

MODULES = (
    environment,
    hpc,
    integrations,
    legacy,
    policies,
    resources,
    sections,
    storage,
    task_container_defaults,
)


def error_types(exc: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    return [e["type"] for e in exc.value.errors()]


def all_models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for module in MODULES:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{value.__name__}"] = value
    return list(found.values())


# --- conventions -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.__name__)
def test_every_field_has_a_description(model: type[BaseModel]) -> None:
    missing = [name for name, f in model.model_fields.items() if not f.description]
    assert missing == []


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.__name__)
def test_json_schema_generates(model: type[BaseModel]) -> None:
    model.model_json_schema()
    model.model_json_schema(mode="serialization")


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_is_explicit_and_resolves(module: Any) -> None:
    assert module.__all__
    for name in module.__all__:
        assert hasattr(module, name), name


# --- environment -----------------------------------------------------------------------------


def test_environment_defaults() -> None:
    assert EnvironmentConfig().to_dict() == {
        "image": {"cpu": None, "cuda": None, "rocm": None},
        "environment_variables": {"cpu": [], "cuda": [], "rocm": []},
        "ports": {},
        "proxy_ports": [],
        "force_pull_image": False,
        "registry_auth": None,
        "pod_spec": None,
        "add_capabilities": [],
        "drop_capabilities": [],
        "framework": "auto",
    }


def test_environment_explicit_nulls_mean_defaults() -> None:
    nulls = dict.fromkeys(EnvironmentConfig.model_fields)
    assert EnvironmentConfig.model_validate(nulls) == EnvironmentConfig()


def test_image_string_fills_every_device() -> None:
    env = EnvironmentConfig.model_validate({"image": "repo/img:1"})
    assert env.image == EnvironmentImage(cpu="repo/img:1", cuda="repo/img:1", rocm="repo/img:1")


def test_image_map_leaves_missing_devices_unset() -> None:
    image = EnvironmentImage.model_validate({"cpu": "c"})
    assert (image.cpu, image.cuda, image.rocm) == ("c", None, None)


@pytest.mark.parametrize(
    ("given", "cuda"),
    [
        ({"gpu": "g"}, "g"),
        ({"gpu": "g", "cuda": None}, "g"),
        ({"gpu": "g", "cuda": "c"}, "c"),
        ({"cuda": "c"}, "c"),
        ({"gpu": None}, None),
    ],
)
def test_image_gpu_is_legacy_cuda(given: dict[str, Any], cuda: str | None) -> None:
    image = EnvironmentImage.model_validate(given)
    assert image.cuda == cuda
    assert "gpu" not in image.to_dict()


def test_environment_variables_list_applies_to_every_device() -> None:
    env = EnvironmentConfig.model_validate({"environment_variables": ["A=1", "B=2"]})
    assert env.environment_variables.to_dict() == {
        "cpu": ["A=1", "B=2"],
        "cuda": ["A=1", "B=2"],
        "rocm": ["A=1", "B=2"],
    }


def test_environment_variables_map_with_gpu() -> None:
    # Determined's gpu-cuda-migration test case.
    env = EnvironmentVariables.model_validate(
        {"gpu": ["ASDF=asdf"], "cpu": ["CPU=cpu"], "rocm": ["ROCM=ROCM"]}
    )
    assert env.to_dict() == {"cpu": ["CPU=cpu"], "cuda": ["ASDF=asdf"], "rocm": ["ROCM=ROCM"]}
    both = EnvironmentVariables.model_validate({"gpu": ["G=1"], "cuda": ["C=1"]})
    assert both.cuda == ["C=1"]


def test_environment_determined_defaults_case() -> None:
    # Determined's "environment defaults with k8sV1.Pod present" test case.
    env = EnvironmentConfig.model_validate(
        {
            "environment_variables": ["ASDF=asdf"],
            "pod_spec": {},
            "ports": {"asdf": 1},
            "registry_auth": {"username": "samiam", "password": "eggsnham"},
            "add_capabilities": ["CAP_STRING"],
            "drop_capabilities": ["OTHER_CAP_STRING"],
        }
    )
    out = env.to_dict()
    assert out["environment_variables"]["cuda"] == ["ASDF=asdf"]
    assert out["force_pull_image"] is False
    assert out["pod_spec"] == {}
    assert out["registry_auth"]["username"] == "samiam"
    assert out["registry_auth"]["serveraddress"] is None


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ({"image": 5}, "image_type"),
        ({"image": {"tpu": "x"}}, "extra_forbidden"),
        ({"environment_variables": "A=1"}, "environment_variables_type"),
        ({"environment_variables": {"cpu": "A=1"}}, "list_type"),
        ({"force_pull_image": "true"}, "bool_type"),
        ({"ports": {"a": "80"}}, "int_type"),
        ({"registry_auth": {"user": "x"}}, "extra_forbidden"),
        ({"docker_flags": ["--x"]}, "extra_forbidden"),
        ({"framework": "jax"}, "literal_error"),
    ],
)
def test_environment_rejects(given: dict[str, Any], kind: str) -> None:
    with pytest.raises(ValidationError) as exc:
        EnvironmentConfig.model_validate(given)
    assert kind in error_types(exc)


def test_proxy_port_defaults() -> None:
    env = EnvironmentConfig.model_validate({"proxy_ports": [{"proxy_port": 8080}]})
    assert env.proxy_ports[0].to_dict() == {
        "proxy_port": 8080,
        "proxy_tcp": False,
        "unauthenticated": False,
        "default_service_id": False,
    }
    with pytest.raises(ValidationError):
        EnvironmentConfig.model_validate({"proxy_ports": [{"proxy_tcp": True}]})


def test_pod_spec_sidecars_are_free_but_the_task_container_is_not() -> None:
    sidecar = {"spec": {"containers": [{"name": "my-sidecar", "security_context": "x"}]}}
    assert EnvironmentConfig.model_validate({"pod_spec": sidecar}).pod_spec == sidecar
    fixed = {
        "spec": {
            "containers": [
                {"name": "my-sidecar", "security_context": "x"},
                {"name": "determined-container", "security_context": "no"},
            ]
        }
    }
    with pytest.raises(ValidationError, match=r"containers\[1\]\.security_context"):
        EnvironmentConfig.model_validate({"pod_spec": fixed})
    with pytest.raises(ValidationError, match="pod name"):
        EnvironmentConfig.model_validate({"pod_spec": {"name": "x"}})
    allowed = {"spec": {"containers": [{"name": "determined-container", "resources": {}}]}}
    assert EnvironmentConfig.model_validate({"pod_spec": allowed}).pod_spec == allowed


def test_image_json_schema_documents_both_forms() -> None:
    schema = EnvironmentConfig.model_json_schema()["$defs"]["EnvironmentImage"]
    kinds = [alt.get("type") for alt in schema["anyOf"]]
    assert kinds == ["string", "object"]
    assert "gpu" in schema["anyOf"][1]["properties"]
    serialized = EnvironmentConfig.model_json_schema(mode="serialization")
    assert serialized["$defs"]["EnvironmentImage"]["type"] == "object"


# --- resources -------------------------------------------------------------------------------


def test_resources_defaults() -> None:
    assert ResourcesConfig().to_dict() == {
        "slots_per_trial": 1,
        "max_slots": None,
        "weight": 1,
        "priority": None,
        "resource_pool": "",
        "is_single_node": False,
        "shm_size": None,
        "devices": [],
        "slots": None,
        "native_parallel": False,
        "agent_label": None,
    }


def test_resources_explicit_nulls_mean_defaults() -> None:
    nulls = dict.fromkeys(ResourcesConfig.model_fields)
    assert ResourcesConfig.model_validate(nulls) == ResourcesConfig()


def test_devices_string_and_map_forms() -> None:
    # Determined's "devices defaults, in string and map forms" test case.
    res = ResourcesConfig.model_validate(
        {
            "devices": [
                {"host_path": "/h1", "container_path": "/c1", "mode": "r"},
                {"host_path": "/h2", "container_path": "/c2"},
                "/h3:/c3:r",
                "/h4:/c4",
            ]
        }
    )
    assert [d.to_dict() for d in res.devices] == [
        {"host_path": "/h1", "container_path": "/c1", "mode": "r"},
        {"host_path": "/h2", "container_path": "/c2", "mode": "mrw"},
        {"host_path": "/h3", "container_path": "/c3", "mode": "r"},
        {"host_path": "/h4", "container_path": "/c4", "mode": "mrw"},
    ]


@pytest.mark.parametrize("bad", ["/h", "/a:/b:r:x"])
def test_device_string_needs_two_or_three_fields(bad: str) -> None:
    with pytest.raises(ValidationError, match="host_path:container_path"):
        Device.model_validate(bad)


@pytest.mark.parametrize("priority", [1, 42, 99])
def test_priority_in_range(priority: int) -> None:
    assert ResourcesConfig.model_validate({"priority": priority}).priority == priority


@pytest.mark.parametrize("priority", [0, 100, -1])
def test_priority_out_of_range(priority: int) -> None:
    with pytest.raises(ValidationError):
        ResourcesConfig.model_validate({"priority": priority})


@pytest.mark.parametrize("value", [0, 4096, "4G", "4gb", "1.5 GiB", "512M", "1024b", "8"])
def test_shm_size_accepted(value: int | str) -> None:
    assert ResourcesConfig.model_validate({"shm_size": value}).shm_size == value


@pytest.mark.parametrize("value", ["4X", "G", "-1G", 1.5, True])
def test_shm_size_rejected_with_one_error(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        ResourcesConfig.model_validate({"shm_size": value})
    assert error_types(exc) == ["shm_size"]


@pytest.mark.parametrize(
    "given",
    [{"slots_per_trial": -1}, {"slots_per_trial": "2"}, {"weight": "1"}, {"agent": "x"}],
)
def test_resources_rejects(given: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ResourcesConfig.model_validate(given)


def test_weight_accepts_integers_and_floats() -> None:
    assert ResourcesConfig.model_validate({"weight": 2}).weight == 2
    assert ResourcesConfig.model_validate({"weight": 0.5}).weight == 0.5


# --- checkpoint storage ----------------------------------------------------------------------

RETENTION = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"type": "shared_fs", "host_path": "/mnt/ckpt"},
            {
                "type": "shared_fs",
                "host_path": "/mnt/ckpt",
                "storage_path": None,
                "propagation": "rprivate",
                "container_path": None,
                "checkpoint_path": None,
                "tensorboard_path": None,
            },
        ),
        (
            {"type": "directory", "container_path": "/ckpt"},
            {"type": "directory", "container_path": "/ckpt"},
        ),
        (
            {"type": "s3", "bucket": "b"},
            {
                "type": "s3",
                "bucket": "b",
                "prefix": None,
                "access_key": None,
                "secret_key": None,
                "endpoint_url": None,
            },
        ),
        ({"type": "gcs", "bucket": "b"}, {"type": "gcs", "bucket": "b", "prefix": None}),
        (
            {"type": "azure", "container": "c", "connection_string": "cs"},
            {
                "type": "azure",
                "container": "c",
                "connection_string": "cs",
                "account_url": None,
                "credential": None,
            },
        ),
    ],
)
def test_storage_types_and_defaults(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert STORAGE.validate_python(given).to_dict() == {**expected, **RETENTION}


def test_storage_types_are_the_union_members() -> None:
    assert STORAGE_TYPES == ("shared_fs", "directory", "s3", "gcs", "azure")


@pytest.mark.parametrize("kind", ["hdfs", "local", "S3"])
def test_unknown_storage_type_names_the_allowed_ones(kind: str) -> None:
    with pytest.raises(ValidationError) as exc:
        STORAGE.validate_python({"type": kind})
    message = str(exc.value)
    assert all(f"'{t}'" in message for t in STORAGE_TYPES)
    assert error_types(exc) == ["union_tag_invalid"]


def test_storage_needs_a_type() -> None:
    with pytest.raises(ValidationError) as exc:
        STORAGE.validate_python({"host_path": "/x"})
    assert error_types(exc) == ["union_tag_not_found"]


def test_storage_error_location_includes_the_tag() -> None:
    with pytest.raises(ValidationError) as exc:
        STORAGE.validate_python({"type": "s3", "bucket": "b", "save_trial_best": -1})
    assert exc.value.errors()[0]["loc"] == ("s3", "save_trial_best")


@pytest.mark.parametrize(
    "given",
    [
        {"type": "s3"},
        {"type": "gcs"},
        {"type": "directory"},
        {"type": "shared_fs"},
        {"type": "azure", "connection_string": "cs"},
        {"type": "s3", "bucket": "b", "region": "x"},
    ],
)
def test_storage_required_and_unknown_fields(given: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        STORAGE.validate_python(given)


@pytest.mark.parametrize(
    ("extra", "ok"),
    [
        ({"connection_string": "cs"}, True),
        ({"account_url": "https://a"}, True),
        ({"account_url": "https://a", "credential": "sas"}, True),
        ({}, False),
        ({"connection_string": "cs", "account_url": "https://a"}, False),
        ({"connection_string": "cs", "credential": "sas"}, False),
    ],
)
def test_azure_connection_rules(extra: dict[str, Any], ok: bool) -> None:
    given = {"type": "azure", "container": "c", **extra}
    if ok:
        STORAGE.validate_python(given)
    else:
        with pytest.raises(ValidationError):
            STORAGE.validate_python(given)


@pytest.mark.parametrize(
    ("storage_path", "ok"),
    [
        ("checkpoints", True),
        ("a/../b", True),
        ("/mnt/ckpt/sub", True),
        ("/mnt/ckpt", True),
        ("../elsewhere", False),
        ("/tmp/x", False),
    ],
)
def test_shared_fs_storage_path_inside_host_path(storage_path: str, ok: bool) -> None:
    given = {"type": "shared_fs", "host_path": "/mnt/ckpt", "storage_path": storage_path}
    if ok:
        STORAGE.validate_python(given)
    else:
        with pytest.raises(ValidationError, match="subdirectory of host_path"):
            STORAGE.validate_python(given)


@pytest.mark.parametrize("prefix", ["..", "../a", "a/..", "a/../b"])
@pytest.mark.parametrize("kind", ["s3", "gcs"])
def test_object_store_prefix_may_not_climb(kind: str, prefix: str) -> None:
    with pytest.raises(ValidationError, match="must not contain"):
        STORAGE.validate_python({"type": kind, "bucket": "b", "prefix": prefix})
    assert STORAGE.validate_python({"type": kind, "bucket": "b", "prefix": "a/..b"})


def test_storage_explicit_nulls_mean_defaults() -> None:
    given = {"type": "s3", "bucket": "b", "save_trial_best": None, "prefix": None}
    assert STORAGE.validate_python(given) == STORAGE.validate_python({"type": "s3", "bucket": "b"})


# --- hpc -------------------------------------------------------------------------------------


def test_hpc_defaults() -> None:
    assert SlurmConfig().to_dict() == {"slots_per_node": None, "gpu_type": None, "sbatch_args": []}
    assert PbsConfig().to_dict() == {"slots_per_node": None, "pbsbatch_args": []}


@pytest.mark.parametrize(
    ("model", "given"),
    [
        (SlurmConfig, {"slots_per_node": 0}),
        (SlurmConfig, {"sbatch_args": "--time=1"}),
        (PbsConfig, {"sbatch_args": []}),
        (PbsConfig, {"slots_per_node": 0}),
    ],
)
def test_hpc_rejects(model: type[BaseModel], given: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(given)


# --- log and retention policies --------------------------------------------------------------


def test_default_log_policies_are_determineds() -> None:
    assert [p.to_dict() for p in DEFAULT_LOG_POLICIES] == [
        {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*", "action": None},
        {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*", "action": None},
    ]
    oom, ecc = (re.compile(p.pattern or "") for p in DEFAULT_LOG_POLICIES)
    assert oom.match("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert ecc.match("RuntimeError: CUDA error: uncorrectable ECC error encountered")


def test_log_policies_new_shape() -> None:
    policies = LOG_POLICIES.validate_python(
        [
            {"name": "ECC Error", "pattern": ".*ECC.*", "action": "exclude_node"},
            {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*", "action": "cancel_retries"},
            {"name": "label only", "pattern": "x"},
        ]
    )
    assert [p.action for p in policies] == ["exclude_node", "cancel_retries", None]


def test_log_policies_legacy_shape_is_normalized() -> None:
    policies = LOG_POLICIES.validate_python(
        [
            {"pattern": ".*ECC.*", "action": {"type": "exclude_node"}},
            {"pattern": ".*OOM.*", "action": {"type": "cancel_retries"}},
        ]
    )
    assert [p.to_dict() for p in policies] == [
        {"name": None, "pattern": ".*ECC.*", "action": "exclude_node"},
        {"name": None, "pattern": ".*OOM.*", "action": "cancel_retries"},
    ]


def test_log_policy_name_without_pattern_disables_a_default() -> None:
    policy = LogPolicy.model_validate({"name": "CUDA OOM", "pattern": None})
    assert policy.pattern is None


def test_empty_log_policies_are_valid() -> None:
    assert LOG_POLICIES.validate_python([]) == []


@pytest.mark.parametrize(
    "given",
    [
        [{"name": "a", "pattern": "x"}, {"name": "a", "pattern": "y"}],
        [{"pattern": "x", "action": "notallowedstring"}],
        [{"pattern": "x", "action": 3}],
        [{"pattern": "x", "action": {"type": "signal"}}],
        [{"pattern": "x", "action": {"type": "cancel_retries", "extra": 1}}],
        [{"pattern": "x", "action": {}}],
        [{"pattern": "x", "actions": ["cancel_retries"]}],
        {"name": "a"},
    ],
)
def test_log_policies_reject(given: Any) -> None:
    with pytest.raises(ValidationError):
        LOG_POLICIES.validate_python(given)


def test_duplicate_log_policy_names_are_named_in_the_error() -> None:
    with pytest.raises(ValidationError, match="'a' more than once"):
        LOG_POLICIES.validate_python([{"name": "a"}, {"name": "a"}])


def test_unnamed_legacy_policies_may_repeat() -> None:
    LOG_POLICIES.validate_python([{"pattern": "a"}, {"pattern": "a"}])


@pytest.mark.parametrize(("days", "ok"), [(-1, True), (0, True), (32767, True), (-2, False)])
def test_retention_policy_bounds(days: int, ok: bool) -> None:
    if ok:
        assert RetentionPolicyConfig.model_validate({"log_retention_days": days})
    else:
        with pytest.raises(ValidationError):
            RetentionPolicyConfig.model_validate({"log_retention_days": days})
    assert RetentionPolicyConfig().log_retention_days is None
    with pytest.raises(ValidationError):
        RetentionPolicyConfig.model_validate({"log_retention_days": 32768})


# --- small sections --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "unit", "value"),
    [({"batches": 0}, "batches", 0), ({"records": 5}, "records", 5), ({"epochs": 2}, "epochs", 2)],
)
def test_length_one_unit(given: dict[str, int], unit: str, value: int) -> None:
    length = Length.model_validate(given)
    assert (length.unit, length.value) == (unit, value)
    assert length.to_dict() == given


@pytest.mark.parametrize(
    "given",
    [{}, {"batches": 1, "epochs": 1}, {"batches": -1}, {"steps": 1}, {"batches": "1"}, 5],
)
def test_length_rejects(given: Any) -> None:
    with pytest.raises(ValidationError):
        Length.model_validate(given)


def test_length_null_units_are_ignored() -> None:
    assert Length.model_validate({"batches": 3, "epochs": None}).to_dict() == {"batches": 3}


def test_positive_length() -> None:
    assert PositiveLength.model_validate({"records": 1}).value == 1
    with pytest.raises(ValidationError):
        PositiveLength.model_validate({"batches": 0})


def test_bind_mount_defaults_and_checks() -> None:
    # Determined's "bind_mount defaults" test case.
    mount = BindMount.model_validate({"host_path": "/asdf", "container_path": "/zxcv"})
    assert mount.to_dict() == {
        "host_path": "/asdf",
        "container_path": "/zxcv",
        "read_only": False,
        "propagation": "rprivate",
    }
    with pytest.raises(ValidationError, match="absolute"):
        BindMount.model_validate({"host_path": "rel", "container_path": "/x"})
    with pytest.raises(ValidationError, match="must not be"):
        BindMount.model_validate({"host_path": "/a", "container_path": "."})
    assert BindMount.model_validate({"host_path": "/a", "container_path": "rel"})


def test_reproducibility() -> None:
    assert ReproducibilityConfig().experiment_seed is None
    assert ReproducibilityConfig.model_validate({"experiment_seed": 2**32 - 1}).experiment_seed
    for bad in (-1, 2**32, "7"):
        with pytest.raises(ValidationError):
            ReproducibilityConfig.model_validate({"experiment_seed": bad})


def test_profiling_defaults_and_range() -> None:
    assert ProfilingConfig().to_dict() == {
        "enabled": False,
        "begin_on_batch": 0,
        "end_after_batch": None,
        "sync_timings": True,
    }
    ProfilingConfig.model_validate({"enabled": True, "begin_on_batch": 3, "end_after_batch": 3})
    ProfilingConfig.model_validate({"enabled": False, "begin_on_batch": 5, "end_after_batch": 3})
    with pytest.raises(ValidationError):
        ProfilingConfig.model_validate({"enabled": True, "begin_on_batch": 5, "end_after_batch": 3})


def test_optimizations_defaults() -> None:
    assert OptimizationsConfig().to_dict() == {
        "aggregation_frequency": 1,
        "average_aggregated_gradients": True,
        "average_training_metrics": True,
        "gradient_compression": False,
        "grad_updates_size_file": None,
        "mixed_precision": "O0",
        "tensor_fusion_threshold": 64,
        "tensor_fusion_cycle_time": 5,
        "auto_tune_tensor_fusion": False,
    }
    for bad in ({"aggregation_frequency": 0}, {"mixed_precision": "O4"}):
        with pytest.raises(ValidationError):
            OptimizationsConfig.model_validate(bad)


def test_integrations() -> None:
    assert IntegrationsConfig().to_dict() == {"pachyderm": None, "webhooks": None}
    pach = {
        "pachd": {"host": "pachd", "port": 30650},
        "proxy": {"scheme": "http", "host": "proxy", "port": 80},
        "dataset": {"project": "p", "repo": "r", "commit": "c", "branch": "master"},
    }
    config = IntegrationsConfig.model_validate({"pachyderm": pach})
    assert config.pachyderm is not None
    assert config.pachyderm.pachd.token == ""
    with pytest.raises(ValidationError):
        IntegrationsConfig.model_validate({"pachyderm": {"pachd": pach["pachd"]}})
    with pytest.raises(ValidationError):
        IntegrationsConfig.model_validate({"pachyderm": {**pach, "dataset": {"project": "p"}}})
    hooks = IntegrationsConfig.model_validate({"webhooks": {"webhook_name": ["slack"]}})
    assert hooks.to_dict()["webhooks"] == {
        "webhook_id": None,
        "webhook_name": ["slack"],
        "exclude": False,
    }


def test_legacy_sections() -> None:
    assert DATA_LAYER.validate_python({"type": "shared_fs"}).to_dict() == {
        "type": "shared_fs",
        "host_storage_path": None,
        "container_storage_path": None,
    }
    DATA_LAYER.validate_python(
        {
            "type": "s3",
            "bucket": "b",
            "bucket_directory_path": "d",
            "local_cache_host_path": "/h",
            "local_cache_container_path": "/c",
        }
    )
    for bad in (
        {"type": "s3", "bucket": "b"},
        {"type": "gcs", "bucket": "b", "bucket_directory_path": "d", "local_cache_host_path": "/h"},
        {"type": "shared_fs", "host_storage_path": "rel"},
        {"type": "hdfs"},
    ):
        with pytest.raises(ValidationError):
            DATA_LAYER.validate_python(bad)
    security = SecurityConfig.model_validate({"kerberos": {"config_file": "/etc/krb5.conf"}})
    assert security.kerberos is not None
    with pytest.raises(ValidationError):
        SecurityConfig.model_validate({"kerberos": {}})


# --- task_container_defaults -----------------------------------------------------------------


def test_task_container_defaults_are_all_unset() -> None:
    assert set(TaskContainerDefaults().to_dict().values()) == {None}


def test_task_container_defaults_accepts_the_experiment_forms() -> None:
    tcd = TaskContainerDefaults.model_validate(
        {
            "shm_size_bytes": 4294967296,
            "network_mode": "host",
            "image": {"cpu": "c", "gpu": "g"},
            "environment_variables": ["A=1"],
            "devices": ["/dev/x:/dev/x"],
            "bind_mounts": [{"host_path": "/data", "container_path": "/data"}],
            "log_policies": [{"pattern": "x", "action": {"type": "exclude_node"}}],
            "slurm": {"sbatch_args": ["--time=1:00:00"]},
            "pbs": {"pbsbatch_args": []},
            "cpu_pod_spec": {"spec": {}},
            "preemption_timeout": 60,
            "kubernetes": {"max_slots_per_pod": 8},
            "startup_hook": "echo hi",
        }
    )
    assert tcd.image == EnvironmentImage(cpu="c", cuda="g")
    assert tcd.environment_variables is not None
    assert tcd.environment_variables.rocm == ["A=1"]
    assert tcd.log_policies is not None
    assert tcd.log_policies[0].action == "exclude_node"
    assert tcd.force_pull_image is None


@pytest.mark.parametrize(
    "given",
    [
        {"shm_size_bytes": 0},
        {"preemption_timeout": 0},
        {"log_policies": [{"name": "a"}, {"name": "a"}]},
        {"network_mode": 1},
        {"shm_size": 1},
    ],
)
def test_task_container_defaults_rejects(given: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TaskContainerDefaults.model_validate(given)


def test_task_container_defaults_explicit_nulls() -> None:
    nulls = dict.fromkeys(TaskContainerDefaults.model_fields)
    assert TaskContainerDefaults.model_validate(nulls) == TaskContainerDefaults()
