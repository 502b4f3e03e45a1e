"""Strategic merge of pod specs (the experiment's over the pool's defaults)."""

from __future__ import annotations

from stalwart.master.rm.kubernetes.allocations import pod_spec_of
from stalwart.master.rm.kubernetes.podspec import strategic_merge


def test_containers_merge_by_name_and_env_by_name() -> None:
    base = {
        "containers": [
            {
                "name": "a",
                "image": "x",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            }
        ],
        "nodeSelector": {"zone": "1", "disk": "ssd"},
    }
    patch = {
        "containers": [
            {"name": "a", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
            {"name": "b", "image": "y"},
        ],
        "nodeSelector": {"zone": "2", "disk": None},
    }
    merged = strategic_merge(base, patch)
    assert merged["containers"][0] == {
        "name": "a",
        "image": "x",
        "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "3"},
            {"name": "C", "value": "4"},
        ],
    }
    assert merged["containers"][1] == {"name": "b", "image": "y"}
    assert merged["nodeSelector"] == {"zone": "2"}
    assert base["nodeSelector"] == {"zone": "1", "disk": "ssd"}, "inputs are not modified"


def test_lists_without_a_merge_key_are_replaced() -> None:
    base = {"tolerations": [{"key": "a", "operator": "Exists"}]}
    patch = {"tolerations": [{"key": "b", "operator": "Exists"}]}
    assert strategic_merge(base, patch)["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_the_experiment_pod_spec_wins_over_the_pool_defaults() -> None:
    defaults = {
        "gpu_pod_spec": {
            "spec": {
                "priorityClassName": "low",
                "volumes": [{"name": "shared", "hostPath": {"path": "/mnt"}}],
            }
        },
        "cpu_pod_spec": {"spec": {"priorityClassName": "cpu"}},
    }
    mine = {
        "spec": {
            "priorityClassName": "high",
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    }
    gpu = pod_spec_of(mine, defaults, gpu=True)
    assert gpu["spec"]["priorityClassName"] == "high"
    assert [v["name"] for v in gpu["spec"]["volumes"]] == ["shared", "scratch"]
    assert pod_spec_of(None, defaults, gpu=False) == {"spec": {"priorityClassName": "cpu"}}
