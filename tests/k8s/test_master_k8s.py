"""A real ``stalwart master`` with ``resource_manager: {type: kubernetes}`` against the fake API.

The master runs as a process; it creates Jobs in the fake over HTTP and follows them with
watches. The tests play the kubelet: they move the pods through their phases
(scheduled, pulling, running, succeeded, failed, ImagePullBackOff) and check what users see
(experiment and trial states, the trial's logs). In the end-to-end test the pod's command (the
launcher of the built Job) really runs, as a local process with the pod's environment and
token file, and a Core API trial completes with its metrics.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stalwart.local import LocalCluster
from stalwart.master.rm.kubernetes.manifests import ALLOCATION_LABEL
from stalwart.master.rm.kubernetes.podspec import TASK_CONTAINER
from tests.integration.api import Api
from tests.integration.conftest import free_port, trial_files
from tests.k8s.fake_api import ApiError, FakeKube
from tests.k8s.validate import assert_valid

NS = "stalwart"
MANAGED = "app.kubernetes.io/managed-by=stalwart"


@dataclass
class Setup:
    cluster: LocalCluster
    api: Api
    fake: FakeKube
    tmp: Path


def master_config(kubeconfig: Path, port: int, extra: str = "") -> str:
    return (
        "cluster:\n  preemption_timeout: 20\n  tick: 0.5\n"
        "resource_manager:\n"
        "  type: kubernetes\n"
        f"  namespace: {NS}\n"
        f"  kubeconfig: {kubeconfig}\n"
        f"  master_url: http://127.0.0.1:{port}\n"
        f"  python: {sys.executable}\n"
        "  slot_type: cpu\n"
        "  max_slots_per_pod: 2\n"
        "  prepull:\n    refresh_seconds: 0.5\n"
        f"{extra}"
    )


@pytest.fixture
def k8s(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Setup]:
    fake = FakeKube(bookmark_interval=0.5, token="master-token")
    fake.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake.kubeconfig(NS))
    port = free_port()
    config = tmp_path / "master.yaml"
    config.write_text(master_config(kubeconfig, port, getattr(request, "param", "")))
    cluster = LocalCluster(home=tmp_path / "home", port=port, master_config=config)
    cluster.start_master()
    api = Api(cluster.url)
    try:
        yield Setup(cluster, api, fake, tmp_path)
    finally:
        api.close()
        cluster.stop()
        fake.stop()


def experiment(hp: str = "  steps: 2\n  period: 2", **extra: str) -> str:
    lines = [
        "name: k8s-it",
        "entrypoint: python3 train.py",
        "environment:\n  image: me/train:1",
        "resources:\n  slots_per_trial: 1",
        f"hyperparameters:\n{hp}",
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true",
    ]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def pods_of(setup: Setup, count: int = 1) -> list[dict[str, Any]]:
    return setup.fake.wait_for_pods(NS, MANAGED, count, timeout=90)


def only_trial(setup: Setup, exp_id: int) -> dict[str, Any]:
    trials: list[dict[str, Any]] = setup.api.wait_until(
        lambda: setup.api.trials(exp_id), timeout=60, what="a trial"
    )
    return trials[0]


def wait_logs(setup: Setup, trial_id: int, text: str) -> str:
    logs: str = setup.api.wait_until(
        lambda: (lambda s: s if text in s else None)(setup.api.logs(trial_id)),
        timeout=90,
        what=f"{text!r} in the trial's logs",
    )
    return logs


def test_a_trial_is_a_job_that_pulls_runs_and_succeeds(k8s: Setup) -> None:
    exp_id = k8s.api.create_experiment(experiment(), trial_files("train.py"))
    (pod,) = pods_of(k8s)
    name = pod["metadata"]["name"]
    allocation = pod["metadata"]["labels"][ALLOCATION_LABEL]
    jobs = k8s.fake.list_objects("jobs", NS, MANAGED)["items"]
    assert len(jobs) == 1
    job = jobs[0]
    assert_valid([job])
    task = next(
        c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == TASK_CONTAINER
    )
    assert task["image"] == "me/train:1"
    assert k8s.fake.list_objects("configmaps", NS, MANAGED)["items"]
    trial = only_trial(k8s, exp_id)
    k8s.fake.schedule(name, NS, at="2026-01-01T00:00:00Z")
    k8s.fake.pulling(name, NS)
    wait_logs(k8s, trial["id"], "pulling me/train:1")
    k8s.fake.run(name, NS, at="2026-01-01T00:02:05Z")
    logs = wait_logs(k8s, trial["id"], "are running")
    assert "image pull and start took 125.0s" in logs
    (run,) = k8s.api.get(f"/api/v1/tasks/{trial['taskId']}")["task"]["allocations"]
    assert run["imagePullSeconds"] == 125.0  # stored on the allocation, shown in the UI
    k8s.fake.succeed(name, NS)
    exp = k8s.api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_COMPLETED"
    assert "created Kubernetes Job" in k8s.api.logs(trial["id"])
    k8s.api.wait_until(
        lambda: not k8s.fake.list_objects("secrets", NS, MANAGED)["items"],
        timeout=60,
        what="the token Secret and ConfigMap to be deleted after the exit",
    )
    assert not k8s.fake.list_objects("configmaps", NS, MANAGED)["items"]
    kept = k8s.fake.list_objects("jobs", NS, f"{ALLOCATION_LABEL}={allocation}")["items"]
    assert len(kept) == 1, "the Job stays until its TTL, for kubectl inspection"


def test_a_failed_pod_fails_the_trial_with_its_exit_code(k8s: Setup) -> None:
    exp_id = k8s.api.create_experiment(experiment(max_restarts="0"), trial_files("train.py"))
    (pod,) = pods_of(k8s)
    name = pod["metadata"]["name"]
    k8s.fake.schedule(name, NS)
    k8s.fake.run(name, NS)
    k8s.fake.fail(name, 3, NS, message="CUDA error: out of memory")
    exp = k8s.api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_ERROR"
    logs = k8s.api.logs(only_trial(k8s, exp_id)["id"])
    assert "exit code 3" in logs
    assert "CUDA error: out of memory" in logs


def test_image_pull_backoff_errors_the_trial_at_once_with_the_registry_message(k8s: Setup) -> None:
    exp_id = k8s.api.create_experiment(experiment(max_restarts="5"), trial_files("train.py"))
    (pod,) = pods_of(k8s)
    name = pod["metadata"]["name"]
    k8s.fake.schedule(name, NS)
    message = 'Back-off pulling image "me/train:1": pull access denied, repository does not exist'
    k8s.fake.image_pull_backoff(name, message, NS)
    exp = k8s.api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_ERROR"
    trial = only_trial(k8s, exp_id)
    assert trial["restarts"] == 0
    assert message in k8s.api.logs(trial["id"])
    k8s.api.wait_until(
        lambda: not k8s.fake.list_objects("jobs", NS, MANAGED)["items"],
        timeout=60,
        what="the Job to be deleted",
    )


def test_kill_deletes_the_job_and_its_objects(k8s: Setup) -> None:
    exp_id = k8s.api.create_experiment(experiment(), trial_files("train.py"))
    (pod,) = pods_of(k8s)
    k8s.fake.schedule(pod["metadata"]["name"], NS)
    k8s.fake.run(pod["metadata"]["name"], NS)
    k8s.api.wait_until(
        lambda: (
            k8s.api.trials(exp_id)[0]["state"] == "STATE_RUNNING"
            or "are running" in k8s.api.logs(k8s.api.trials(exp_id)[0]["id"])
        ),
        timeout=90,
        what="the trial to run",
    )
    k8s.api.post(f"/api/v1/experiments/{exp_id}/kill")
    exp = k8s.api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_CANCELED"
    for kind in ("jobs", "configmaps", "secrets", "pods"):
        assert not k8s.fake.list_objects(kind, NS, MANAGED)["items"], kind


def test_a_restarted_master_reattaches_to_its_running_job(k8s: Setup) -> None:
    exp_id = k8s.api.create_experiment(experiment(), trial_files("train.py"))
    (pod,) = pods_of(k8s)
    name = pod["metadata"]["name"]
    k8s.fake.schedule(name, NS)
    k8s.fake.run(name, NS)
    trial = only_trial(k8s, exp_id)
    wait_logs(k8s, trial["id"], "are running")
    k8s.cluster.kill_master()
    k8s.cluster.start_master()
    k8s.fake.succeed(name, NS)
    exp = k8s.api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_COMPLETED"
    jobs = [m for m, path in k8s.fake.requests if m == "POST" and "/jobs" in path]
    assert len(jobs) == 1, "the new master adopted the Job instead of creating another"


GANG = "  pool_slot_types:\n    default: cuda\n  gang_timeout_seconds: 600\n"


@pytest.mark.parametrize("k8s", [GANG], indirect=True)
def test_a_multi_pod_trial_is_all_or_nothing(k8s: Setup) -> None:
    config = experiment(max_restarts="0").replace("slots_per_trial: 1", "slots_per_trial: 4")
    exp_id = k8s.api.create_experiment(config, trial_files("train.py"))
    first, second = pods_of(k8s, 2)
    jobs = k8s.fake.list_objects("jobs", NS, MANAGED)["items"]
    assert jobs[0]["spec"]["parallelism"] == 2
    services = k8s.fake.list_objects("services", NS, MANAGED)["items"]
    assert [s["spec"]["clusterIP"] for s in services] == ["None"]
    assert_valid([jobs[0], *services])
    for pod in (first, second):
        k8s.fake.schedule(pod["metadata"]["name"], NS)
    k8s.fake.run(first["metadata"]["name"], NS)
    trial = only_trial(k8s, exp_id)
    assert k8s.api.trials(exp_id)[0]["state"] != "STATE_COMPLETED"
    k8s.fake.fail(second["metadata"]["name"], 1, NS)
    exp = k8s.api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_ERROR"
    assert "failed" in k8s.api.logs(trial["id"])
    k8s.api.wait_until(
        lambda: not k8s.fake.list_objects("pods", NS, MANAGED)["items"],
        timeout=60,
        what="the other pod to be stopped with its Job",
    )


def test_the_prepull_daemonset_follows_queued_experiments(k8s: Setup) -> None:
    prepull = "stalwart.dev/prepull-pool"

    def images() -> list[str]:
        sets = k8s.fake.list_objects("daemonsets", NS, prepull)["items"]
        if not sets:
            return []
        return [c["image"] for c in sets[0]["spec"]["template"]["spec"]["initContainers"]]

    k8s.api.wait_until(images, timeout=60, what="a pre-pull DaemonSet")
    assert "me/train:1" not in images()
    exp_id = k8s.api.create_experiment(experiment(), trial_files("train.py"))
    k8s.api.wait_until(lambda: "me/train:1" in images(), timeout=60, what="the experiment's image")
    (ds,) = k8s.fake.list_objects("daemonsets", NS, prepull)["items"]
    assert_valid([ds])
    (pod,) = pods_of(k8s)
    k8s.fake.schedule(pod["metadata"]["name"], NS)
    k8s.fake.run(pod["metadata"]["name"], NS)
    k8s.fake.succeed(pod["metadata"]["name"], NS)
    k8s.api.wait_state(exp_id, timeout=90)
    k8s.api.wait_until(
        lambda: "me/train:1" not in images(), timeout=60, what="the stale image removed"
    )


def pod_command(
    setup: Setup, pod: dict[str, Any], workdir: Path
) -> tuple[list[str], dict[str, str]]:
    """The pod's task container as a local process: its command, and its environment (the
    ConfigMap's variables, the token Secret as a file under ``workdir``, the Job's completion
    index)."""
    job = setup.fake.get("jobs", NS, pod["metadata"]["labels"]["job-name"])
    spec = job["spec"]["template"]["spec"]
    task = next(c for c in spec["containers"] if c["name"] == TASK_CONTAINER)
    env = dict(os.environ)
    for source in task["envFrom"]:
        config = setup.fake.get("configmaps", NS, source["configMapRef"]["name"])
        env.update({k: v for k, v in config["data"].items() if k.isupper()})
    token_volume = next(v for v in spec["volumes"] if "secret" in v)
    secret = setup.fake.get("secrets", NS, token_volume["secret"]["secretName"])
    workdir.mkdir(exist_ok=True)
    token_file = workdir / "token"
    token_file.write_bytes(base64.b64decode(secret["data"]["token"]))
    token_file.chmod(0o400)
    env["STALWART_TOKEN_FILE"] = str(token_file)
    env["JOB_COMPLETION_INDEX"] = pod["metadata"]["labels"][
        "batch.kubernetes.io/job-completion-index"
    ]
    return list(task["command"]), env


def run_pod_command(
    setup: Setup, pod: dict[str, Any], workdir: Path
) -> subprocess.CompletedProcess[str]:
    """Run the pod's task container as a local process (:func:`pod_command`) to its end."""
    command, env = pod_command(setup, pod, workdir)
    return subprocess.run(
        command,
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_end_to_end_the_pods_command_runs_a_core_api_trial_to_completion(k8s: Setup) -> None:
    hp = "  steps: 4\n  period: 2\n  x: 0.5"
    exp_id = k8s.api.create_experiment(experiment(hp), trial_files("train.py"))
    (pod,) = pods_of(k8s)
    name = pod["metadata"]["name"]
    k8s.fake.schedule(name, NS)
    k8s.fake.pulling(name, NS)
    k8s.fake.run(name, NS)
    done = run_pod_command(k8s, pod, k8s.tmp / "pod-work")
    assert done.returncode == 0, done.stdout + done.stderr
    k8s.fake.succeed(name, NS)
    exp = k8s.api.wait_state(exp_id, timeout=120)
    trial = only_trial(k8s, exp_id)
    logs = k8s.api.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert [int(m["totalBatches"]) for m in k8s.api.metrics(trial["id"])] == [1, 2, 3, 4]
    assert "training done" in logs


def test_a_quota_refusal_waits_and_an_unschedulable_pod_says_why(k8s: Setup) -> None:
    k8s.fake.fail_next[("POST", "configmaps")] = ApiError(
        403, "Forbidden", 'configmaps "x" is forbidden: exceeded quota: compute, requested: pods=1'
    )
    exp_id = k8s.api.create_experiment(experiment(), trial_files("train.py"))
    trial = only_trial(k8s, exp_id)
    wait_logs(k8s, trial["id"], "exceeded quota")
    (pod,) = pods_of(k8s)
    name = pod["metadata"]["name"]
    k8s.fake.unschedulable(name, "0/3 nodes are available: 3 Insufficient cpu.", NS)
    wait_logs(k8s, trial["id"], "3 Insufficient cpu")
    k8s.fake.schedule(name, NS)
    k8s.fake.run(name, NS)
    k8s.fake.succeed(name, NS)
    assert k8s.api.wait_state(exp_id, timeout=90)["state"] == "STATE_COMPLETED"


TEAM_NAMESPACE = "  workspace_namespaces:\n    Uncategorized: team-a\n"


@pytest.mark.parametrize("k8s", [TEAM_NAMESPACE], indirect=True)
def test_a_workspace_bound_to_a_namespace_runs_its_trials_there(k8s: Setup) -> None:
    exp_id = k8s.api.create_experiment(experiment(), trial_files("train.py"))
    (pod,) = k8s.fake.wait_for_pods("team-a", MANAGED, 1, timeout=90)
    assert not k8s.fake.pods(NS, MANAGED)
    name = pod["metadata"]["name"]
    k8s.fake.schedule(name, "team-a")
    k8s.fake.run(name, "team-a")
    k8s.fake.succeed(name, "team-a")
    assert k8s.api.wait_state(exp_id, timeout=90)["state"] == "STATE_COMPLETED"
    k8s.api.wait_until(
        lambda: not k8s.fake.list_objects("configmaps", "team-a", MANAGED)["items"],
        timeout=60,
        what="the ConfigMap in team-a to be deleted",
    )
