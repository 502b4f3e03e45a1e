"""The objects of an allocation (pure builders), validated against Kubernetes 1.29-1.32."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stalwart.master.rm.kubernetes.manifests import (
    ALLOCATION_LABEL,
    JobRequest,
    allocation_objects,
    dns_name,
    job_manifest,
    job_name,
    label_value,
    pod_slots,
    registry_secret_manifest,
)
from stalwart.master.rm.kubernetes.podspec import TASK_CONTAINER
from tests.k8s.validate import assert_valid

BASE = JobRequest(
    allocation_id="12.0b7c2e4a-6f1d-4e38-9a55-3c1f0d2b9e7a.1",
    task_id="12.0b7c2e4a-6f1d-4e38-9a55-3c1f0d2b9e7a",
    namespace="stalwart",
    image="determinedai/pytorch-ngc-dev:0736b6d",
    slot_type="cuda",
    slots=8,
    max_slots_per_pod=4,
    pool="a100",
    master_url="http://stalwart-master.stalwart:8080",
    user="ada",
    workspace="Uncategorized",
    experiment_id=12,
)


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def _task(job: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in _pod(job)["containers"] if c["name"] == TASK_CONTAINER)


def test_slots_split_into_pods_of_at_most_max_slots() -> None:
    assert pod_slots(8, 4) == [4, 4]
    assert pod_slots(3, 8) == [3]
    assert pod_slots(0, 8) == [0]
    assert pod_slots(5, 2) == [2, 2, 1]


def test_an_eight_gpu_trial_is_one_indexed_job_of_two_four_gpu_pods() -> None:
    job = job_manifest(BASE)
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"]) == (2, 2)
    assert spec["completionMode"] == "Indexed"
    assert spec["backoffLimit"] == 0
    assert spec["ttlSecondsAfterFinished"] == 3600
    task = _task(job)
    assert task["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert task["image"] == BASE.image
    assert task["imagePullPolicy"] == "IfNotPresent"
    assert task["command"] == ["python3", "-m", "stalwart.hpc.task"]
    assert _pod(job)["restartPolicy"] == "Never"
    assert _pod(job)["subdomain"] == job_name(BASE.allocation_id)


def test_rocm_slots_ask_for_amd_gpus_and_cpu_slots_for_cpus() -> None:
    rocm = _task(job_manifest(replace(BASE, slot_type="rocm", slots=2)))
    assert rocm["resources"]["limits"] == {"amd.com/gpu": "2"}
    cpu = _task(
        job_manifest(replace(BASE, slot_type="cpu", slots=3, cpu_per_slot=2, memory_per_slot="4Gi"))
    )
    assert cpu["resources"] == {"requests": {"cpu": "6000m", "memory": "12Gi"}}
    zero = _task(job_manifest(replace(BASE, slots=0)))
    assert zero["resources"] == {"requests": {"cpu": "1000m"}}


def test_labels_name_user_workspace_pool_task_and_allocation() -> None:
    job = job_manifest(replace(BASE, extra_labels={"team": "vision"}))
    labels = job["metadata"]["labels"]
    assert labels[ALLOCATION_LABEL] == BASE.allocation_id
    assert labels["stalwart.dev/user"] == "ada"
    assert labels["stalwart.dev/workspace"] == "Uncategorized"
    assert labels["stalwart.dev/pool"] == "a100"
    assert labels["stalwart.dev/task"] == BASE.task_id
    assert labels["team"] == "vision"
    assert job["spec"]["template"]["metadata"]["labels"] == labels


def test_priority_class_affinity_pull_policy_and_node_selector() -> None:
    request = replace(
        BASE,
        priority_class="stalwart-high",
        disabled_nodes=("node-b", "node-a"),
        force_pull_image=True,
        node_selector={"gpu": "a100"},
    )
    pod = _pod(job_manifest(request))
    assert pod["priorityClassName"] == "stalwart-high"
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expr = term["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert expr == {
        "key": "kubernetes.io/hostname",
        "operator": "NotIn",
        "values": ["node-a", "node-b"],
    }
    assert _task(job_manifest(request))["imagePullPolicy"] == "Always"
    assert pod["nodeSelector"] == {"gpu": "a100"}


def test_registry_auth_becomes_a_dockerconfigjson_pull_secret() -> None:
    auth = {"username": "ada", "password": "s3cret", "serveraddress": "registry.example.com"}
    request = replace(BASE, registry_auth=auth, pull_secrets=("site-wide",))
    secret = registry_secret_manifest(request)
    assert secret is not None
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    entry = config["auths"]["registry.example.com"]
    assert base64.b64decode(entry["auth"]).decode() == "ada:s3cret"
    pulls = [s["name"] for s in _pod(job_manifest(request))["imagePullSecrets"]]
    assert pulls == ["site-wide", secret["metadata"]["name"]]


def test_the_token_travels_in_a_secret_never_in_the_job_or_config_map() -> None:
    objects = allocation_objects(BASE, "tok-very-secret")
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ConfigMap", "Secret", "Service", "Job"]
    secret = objects[1]
    assert base64.b64decode(secret["data"]["token"]).decode() == "tok-very-secret"
    for other in (objects[0], objects[3]):
        assert "tok-very-secret" not in json.dumps(other)
    volumes = {v["name"]: v for v in _pod(objects[3])["volumes"]}
    assert volumes["stalwart-token"]["secret"]["defaultMode"] == 0o400
    assert objects[0]["data"]["STALWART_TOKEN_FILE"] == "/var/run/stalwart/token"


def test_user_pod_spec_folds_our_container_keeps_sidecars_and_cannot_override_the_task() -> None:
    user = {
        "containers": [
            {
                "name": TASK_CONTAINER,
                "image": "evil/image",
                "env": [{"name": "HTTP_PROXY", "value": "http://proxy:3128"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "resources": {"limits": {"memory": "64Gi", "nvidia.com/gpu": "99"}},
            },
            {"name": "log-forwarder", "image": "fluent/fluent-bit:3.0"},
        ],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "restartPolicy": "Always",
    }
    job = job_manifest(replace(BASE, pod_spec=user))
    pod = _pod(job)
    task = _task(job)
    assert task["image"] == BASE.image
    assert {"name": "HTTP_PROXY", "value": "http://proxy:3128"} in task["env"]
    assert {"name": "data", "mountPath": "/data"} in task["volumeMounts"]
    assert task["resources"]["limits"] == {"nvidia.com/gpu": "4", "memory": "64Gi"}
    assert [c["name"] for c in pod["containers"]] == [TASK_CONTAINER, "log-forwarder"]
    assert "data" in {v["name"] for v in pod["volumes"]}
    assert pod["tolerations"] == user["tolerations"]
    assert pod["restartPolicy"] == "Never"
    assert_valid([job])


def test_uneven_pods_are_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="multiple of the pod size"):
        job_manifest(replace(BASE, slots=5, max_slots_per_pod=2))


@pytest.mark.parametrize(
    "request_",
    [
        BASE,
        replace(BASE, slots=1, slot_type="rocm"),
        replace(BASE, slots=0, slot_type="cpu", memory_per_slot="2Gi"),
        replace(
            BASE,
            registry_auth={"auth": "YWRhOnB3"},
            priority_class="p",
            disabled_nodes=("n1",),
            force_pull_image=True,
            node_selector={"pool": "a"},
            pod_spec={"metadata": {"annotations": {"a": "b"}}, "hostIPC": True},
        ),
    ],
    ids=["cuda-2-pods", "rocm", "cpu", "everything"],
)
def test_every_object_is_valid_kubernetes(request_: JobRequest) -> None:
    assert_valid(allocation_objects(request_, "token"))


_LABEL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@given(st.text(min_size=1, max_size=200))
def test_any_id_gives_valid_label_values_and_names(text: str) -> None:
    value = label_value(text)
    assert len(value) <= 63
    assert _LABEL.match(value)
    name = dns_name(text)
    assert len(name) <= 63
    assert _DNS.match(name)


def test_an_interactive_task_is_labelled_with_its_kind_and_declares_its_service_port() -> None:
    notebook = replace(BASE, task_type="notebook", service_port=12370, experiment_id=None)
    job = job_manifest(notebook)
    assert_valid([job])
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["stalwart.dev/task-type"] == "notebook"
    assert "stalwart.dev/experiment" not in labels
    assert _task(job)["ports"] == [{"name": "service", "containerPort": 12370, "protocol": "TCP"}]
    trial = job_manifest(BASE)
    assert trial["metadata"]["labels"]["stalwart.dev/task-type"] == "trial"
    assert "ports" not in _task(trial)
