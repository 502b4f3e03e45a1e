"""Interactive tasks on Kubernetes: commands and notebooks run as Jobs, proxied and cleaned up.

The master is a real process configured with ``resource_manager: {type: kubernetes}`` against
the fake API server (:mod:`tests.k8s.fake_api`); the tests play the kubelet. They move the pod
to Running with the IP ``127.0.0.1`` and run the pod's command (the launcher, ``python -m
stalwart.hpc.task``) as a local process with the pod's ConfigMap environment and token file,
so a command's output really reaches the task's logs and JupyterLab really starts and answers
through the master's proxy. :func:`test_the_proxy_reaches_a_pod_at_its_ip` checks in-process
where the master looks for a pod's address.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Allocation
from stalwart.master.rm import batchjobs
from stalwart.master.rm.kubernetes.manager import KubernetesManager
from stalwart.master.rm.kubernetes.manifests import ALLOCATION_LABEL, LABEL_PREFIX, label_value
from stalwart.master.rm.kubernetes.podspec import TASK_CONTAINER
from stalwart.master.services.task_spec import PORT_BASES
from stalwart.master.state import MasterState
from tests.compat.conftest import det_venv  # noqa: F401  (the official det, a fixture)
from tests.k8s.fake_api import FakeKube
from tests.k8s.test_master_k8s import (  # noqa: F401  (k8s: the master fixture)
    MANAGED,
    NS,
    Setup,
    k8s,
    pod_command,
    pods_of,
    run_pod_command,
)
from tests.k8s.validate import assert_valid
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import live_server, login_headers

WAIT_S = 120.0
"""The longest wait for anything here (a failure, not a pace): JupyterLab may take a while to
start on a loaded machine."""

SERVICE_PORT = PORT_BASES["DET_SERVICE_PORT"]
"""A pod's service port: every pod has its own IP, so the port offset is 0."""


def _task(setup: Setup, kind: str, task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = setup.api.get(f"/api/v1/{kind}s/{task_id}")[kind]
    return found


def _wait_task(setup: Setup, kind: str, task_id: str, state: str) -> dict[str, Any]:
    found: dict[str, Any] = setup.api.wait_until(
        lambda: (lambda t: t if t["state"] == state else None)(_task(setup, kind, task_id)),
        timeout=WAIT_S,
        what=f"{kind} {task_id} in {state}",
    )
    return found


def _task_logs(setup: Setup, task_id: str) -> str:
    response = setup.api.http.get(f"/api/v1/tasks/{task_id}/logs")
    response.raise_for_status()
    lines = [json.loads(line)["result"] for line in response.text.splitlines() if line]
    return "".join(entry.get("log") or entry.get("message", "") for entry in lines)


def _objects(setup: Setup, kind: str, allocation: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = setup.fake.list_objects(
        kind, NS, f"{ALLOCATION_LABEL}={allocation}"
    )["items"]
    return items


def _wait_cleaned_up(setup: Setup, allocation: str) -> None:
    setup.api.wait_until(
        lambda: (
            not _objects(setup, "configmaps", allocation)
            and not _objects(setup, "secrets", allocation)
        ),
        timeout=WAIT_S,
        what="the task's ConfigMap and token Secret to be deleted",
    )


def _task_container(job: dict[str, Any]) -> dict[str, Any]:
    containers = job["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = next(c for c in containers if c["name"] == TASK_CONTAINER)
    return found


def _run_command_pod(setup: Setup, task_id: str) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Check the command's Job, run its pod (the launcher as a local process) and report the
    pod Succeeded once the launcher exited; (the allocation label, the launcher's run)."""
    (pod,) = pods_of(setup)
    labels = pod["metadata"]["labels"]
    assert labels[LABEL_PREFIX + "task-type"] == "command"
    assert labels[LABEL_PREFIX + "task"] == label_value(task_id)
    assert labels[LABEL_PREFIX + "user"] == "admin"
    assert LABEL_PREFIX + "experiment" not in labels
    job = setup.fake.get("jobs", NS, labels["job-name"])
    assert_valid([job])
    assert "ports" not in _task_container(job), "a command serves nothing"
    name = pod["metadata"]["name"]
    setup.fake.schedule(name, NS)
    setup.fake.run(name, NS, pod_ip="127.0.0.1")
    done = run_pod_command(setup, pod, setup.tmp / "pod-work")
    return labels[ALLOCATION_LABEL], done


def test_a_command_runs_in_a_pod_and_its_objects_are_cleaned_up(k8s: Setup) -> None:  # noqa: F811
    config = {"entrypoint": ["echo hello from a pod; echo done >&2"], "description": "k8s cmd"}
    task_id = k8s.api.post("/api/v1/commands", {"config": config})["command"]["id"]
    allocation, done = _run_command_pod(k8s, task_id)
    assert done.returncode == 0, done.stdout + done.stderr
    found = _wait_task(k8s, "command", task_id, "STATE_TERMINATED")
    assert found["exitStatus"] == "exited with code 0"
    logs = _task_logs(k8s, task_id)
    assert "hello from a pod" in logs
    assert "created Kubernetes Job" in logs
    # The launcher's exit ended the allocation while the pod still ran: cleaned up all the same.
    _wait_cleaned_up(k8s, allocation)
    (pod,) = pods_of(k8s)
    k8s.fake.succeed(pod["metadata"]["name"], NS)
    assert len(_objects(k8s, "jobs", allocation)) == 1, "the Job stays until its TTL"


def _det(det: Path, url: str, *args: str) -> list[str]:
    return [str(det / "bin" / "det"), "-m", url, *args]


def _det_env(home: Path) -> dict[str, str]:
    config = home / "det-config"
    config.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "DET_DEBUG_CONFIG_PATH": str(config),
        "PYTHONUNBUFFERED": "1",
    }


@pytest.mark.compat
def test_det_cmd_run_streams_the_output_of_its_pod(k8s: Setup, det_venv: Path) -> None:  # noqa: F811
    home = k8s.tmp / "det-home"
    env = _det_env(home)
    login = subprocess.run(
        _det(det_venv, k8s.cluster.url, "user", "login", "admin"),
        input="\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        start_new_session=True,
    )
    assert login.returncode == 0, login.stdout + login.stderr
    det = subprocess.Popen(
        _det(det_venv, k8s.cluster.url, "cmd", "run", "echo hello from det on k8s"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        (pod,) = pods_of(k8s)
        task_id = pod["metadata"]["labels"][LABEL_PREFIX + "task"]
        allocation, done = _run_command_pod(k8s, task_id)
        assert done.returncode == 0, done.stdout + done.stderr
        out, _ = det.communicate(timeout=WAIT_S)
    finally:
        if det.poll() is None:
            det.kill()
            det.communicate()
    assert det.returncode == 0, out
    assert "hello from det on k8s" in out
    found = _wait_task(k8s, "command", task_id, "STATE_TERMINATED")
    assert found["exitStatus"] == "exited with code 0"
    _wait_cleaned_up(k8s, allocation)


def _wait_port_free(port: int) -> None:
    """The pod's service port on this machine (the test runs the pod's command locally)."""
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("0.0.0.0", port))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"port {port} stays taken on this machine: the notebook's local "
                        "JupyterLab cannot listen there"
                    ) from None
        time.sleep(0.5)


@pytest.fixture
def launcher() -> Iterator[list[subprocess.Popen[str]]]:
    """Launchers started by a test; whatever still runs at its end is stopped."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_a_notebook_pod_answers_through_the_proxy_and_kill_deletes_it(
    k8s: Setup,  # noqa: F811
    launcher: list[subprocess.Popen[str]],
) -> None:
    created = k8s.api.post("/api/v1/notebooks", {"config": {"description": "k8s notebook"}})
    task_id = created["notebook"]["id"]
    (pod,) = pods_of(k8s)
    labels = pod["metadata"]["labels"]
    allocation = labels[ALLOCATION_LABEL]
    assert labels[LABEL_PREFIX + "task-type"] == "notebook"
    job = k8s.fake.get("jobs", NS, labels["job-name"])
    assert_valid([job])
    ports = _task_container(job)["ports"]
    assert ports == [{"name": "service", "containerPort": SERVICE_PORT, "protocol": "TCP"}]
    name = pod["metadata"]["name"]
    k8s.fake.schedule(name, NS)
    k8s.fake.run(name, NS, pod_ip="127.0.0.1")
    _wait_port_free(SERVICE_PORT)
    workdir = k8s.tmp / "notebook-pod"
    command, env = pod_command(k8s, pod, workdir)
    proc = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    launcher.append(proc)
    address = _task(k8s, "notebook", task_id)["serviceAddress"]
    assert address.startswith(f"/proxy/{task_id}/lab?token=")

    def page() -> httpx.Response | None:
        assert proc.poll() is None, f"the pod's launcher exited: {proc.communicate()[0]}"
        answer = httpx.get(f"{k8s.cluster.url}{address}", timeout=30, follow_redirects=True)
        return answer if answer.status_code == 200 else None

    lab = k8s.api.wait_until(page, timeout=WAIT_S, what="JupyterLab through the proxy", interval=1)
    assert "JupyterLab" in lab.text
    assert _task(k8s, "notebook", task_id)["state"] == "STATE_RUNNING"

    k8s.api.post(f"/api/v1/notebooks/{task_id}/kill")
    k8s.api.wait_until(
        lambda: not _objects(k8s, "jobs", allocation) and not _objects(k8s, "pods", allocation),
        timeout=WAIT_S,
        what="the notebook's Job and pod to be deleted",
    )
    proc.send_signal(signal.SIGTERM)  # the kubelet stops the deleted pod's container
    out, _ = proc.communicate(timeout=WAIT_S)
    _wait_task(k8s, "notebook", task_id, "STATE_TERMINATED")
    _wait_cleaned_up(k8s, allocation)
    assert "Jupyter Server" in out + _task_logs(k8s, task_id)
    gone = httpx.get(f"{k8s.cluster.url}{address}", timeout=30)
    assert gone.status_code == 404, gone.text


def test_the_proxy_reaches_a_pod_at_its_ip(tmp_path: Path) -> None:
    """``service_host``: the pod's ``status.podIP`` while it runs, over the launcher's report;
    the launcher's report while the informer knows no running pod; nothing once it ended."""
    fake = FakeKube(bookmark_interval=0.2, token="master-token")
    fake.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake.kubeconfig(NS))
    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "kubernetes",
            "namespace": NS,
            "kubeconfig": str(kubeconfig),
            "master_url": "http://master:8080",
            "slot_type": "cpu",
            "prepull": {"enabled": False},
        },
    )
    try:
        with (
            live_server(settings) as live,
            httpx.Client(base_url=live.url, timeout=30) as http,
        ):
            state = live.state
            rm = state.rm
            assert isinstance(rm, KubernetesManager)
            created = http.post("/api/v1/notebooks", json={}, headers=login_headers(http))
            assert created.status_code == 200, created.text
            ClusterLoop(state).run_round()  # claimed, Job created
            (pod,) = fake.wait_for_pods(NS, MANAGED, 1, timeout=30)
            allocation_id = _allocation_of(state, created.json()["notebook"]["id"])

            def host() -> str | None:
                with state.sessions() as session:
                    return rm.service_host(session, allocation_id)

            assert host() is None  # not started: no address yet
            with state.sessions() as session:
                batchjobs.record_node(session, allocation_id, 0, "node-1", "10.9.9.9")
                session.commit()
            assert host() == "10.9.9.9"  # the launcher's report, while no pod runs
            name = pod["metadata"]["name"]
            fake.schedule(name, NS)
            fake.run(name, NS, pod_ip="10.244.3.7")
            _until(lambda: host() == "10.244.3.7", "the pod's IP from the informer")
            fake.succeed(name, NS)
            _until(lambda: host() is None, "no address once the pod ended")
    finally:
        fake.stop()


def _allocation_of(state: MasterState, task_id: str) -> str:
    with state.sessions() as session:
        return str(
            session.scalars(select(Allocation.id).where(Allocation.task_id == task_id)).one()
        )


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
