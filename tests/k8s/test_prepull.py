"""The pre-pull plan (pure) and its DaemonSet, validated against Kubernetes 1.29-1.32."""

from __future__ import annotations

from stalwart.environments.manifest import load_manifest
from stalwart.environments.prepull import ExperimentImages, experiment_image, prepull_plan
from stalwart.master.rm.kubernetes.prepull import PLAN_ANNOTATION, daemonset_manifest, plan_hash
from tests.k8s.validate import assert_valid


def test_the_plan_holds_the_manifest_defaults_and_queued_experiments_images_per_pool() -> None:
    manifest = load_manifest()
    experiments = [
        ExperimentImages(
            "gpu", {"environment": {"image": {"cuda": "me/train:1", "cpu": "me/cpu:1"}}}
        ),
        ExperimentImages("gpu", {"environment": {"image": "me/train:1"}}),
        ExperimentImages("cpu", {"environment": {"image": "me/etl:2"}}),
        ExperimentImages("nowhere", {"environment": {"image": "me/lost:1"}}),
        ExperimentImages("gpu", {"environment": {}}),
    ]
    plan = prepull_plan(manifest, {"gpu": "cuda", "cpu": "cpu"}, experiments)
    cuda_defaults = [manifest.default_image(f, "cuda")[1] for f in ("pytorch", "tensorflow")]
    assert plan["gpu"][: len(cuda_defaults)] == list(dict.fromkeys(cuda_defaults))
    assert plan["gpu"][-1] == "me/train:1"
    assert plan["gpu"].count("me/train:1") == 1
    assert plan["cpu"][-1] == "me/etl:2"
    assert "nowhere" not in plan
    bare = prepull_plan(manifest, {"gpu": "cuda"}, experiments, include_defaults=False)
    assert bare == {"gpu": ["me/train:1"]}


def test_a_cpu_only_trial_prepulls_its_cpu_image_even_in_a_gpu_pool() -> None:
    config = {
        "resources": {"slots_per_trial": 0},
        "environment": {"image": {"cuda": "g", "cpu": "c"}},
    }
    assert experiment_image(config, "cuda") == "c"


def test_the_daemonset_pulls_each_image_in_an_init_container_and_holds_a_pause_container() -> None:
    images = ["determinedai/pytorch-ngc-dev:0736b6d", "me/train:1"]
    ds = daemonset_manifest(
        "gpu",
        images,
        namespace="stalwart",
        pause_image="registry.k8s.io/pause:3.9",
        node_selector={"pool": "gpu"},
        priority_class="stalwart-prepull",
        pull_secrets=["regcred"],
    )
    pod = ds["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]] == images
    assert all(c["imagePullPolicy"] == "IfNotPresent" for c in pod["initContainers"])
    assert [c["image"] for c in pod["containers"]] == ["registry.k8s.io/pause:3.9"]
    assert ds["spec"]["template"]["metadata"]["annotations"][PLAN_ANNOTATION] == plan_hash(images)
    assert plan_hash(images) != plan_hash(images[:1])
    assert_valid([ds])
