"""Pod and Job statuses as allocation states (pure)."""

from __future__ import annotations

from typing import Any

from stalwart.master.rm.kubernetes.podspec import TASK_CONTAINER
from stalwart.master.rm.kubernetes.states import allocation_status, pod_view, pull_seconds

INDEX = "batch.kubernetes.io/job-completion-index"


def pod(rank: int, phase: str = "Pending", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"job-{rank}-abcde", "labels": {INDEX: str(rank)}},
        "spec": {},
        "status": {"phase": phase, **status},
    }


SCHEDULED = [
    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
]


def task_state(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": TASK_CONTAINER, "state": state}]


def views(*pods: dict[str, Any]) -> list[Any]:
    return [pod_view(p, TASK_CONTAINER) for p in pods]


def test_unscheduled_pods_leave_the_allocation_assigned_with_the_reason() -> None:
    unsched = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes have nvidia.com/gpu",
        }
    ]
    status = allocation_status({}, views(pod(0, conditions=unsched)), 1)
    assert status.state == "ASSIGNED"
    assert status.waiting == "Unschedulable: 0/3 nodes have nvidia.com/gpu"


def test_scheduled_but_not_running_is_pulling_and_the_pull_time_is_measured() -> None:
    waiting = task_state({"waiting": {"reason": "ContainerCreating"}})
    assert (
        allocation_status(
            {}, views(pod(0, conditions=SCHEDULED, containerStatuses=waiting)), 1
        ).state
        == "PULLING"
    )
    running = pod(
        0,
        "Running",
        conditions=SCHEDULED,
        containerStatuses=task_state({"running": {"startedAt": "2026-01-01T00:03:20Z"}}),
    )
    assert allocation_status({}, views(running), 1).state == "RUNNING"
    assert pull_seconds(views(running)) == 200.0


def test_a_gang_runs_only_when_every_pod_runs() -> None:
    run = task_state({"running": {"startedAt": "2026-01-01T00:00:05Z"}})
    one = views(pod(0, "Running", conditions=SCHEDULED, containerStatuses=run), pod(1))
    assert allocation_status({}, one, 2).state == "PULLING"
    assert (
        allocation_status({}, views(pod(0, "Running", containerStatuses=run)), 2).state == "PULLING"
    )
    both = views(pod(0, "Running", containerStatuses=run), pod(1, "Running", containerStatuses=run))
    assert allocation_status({}, both, 2).state == "RUNNING"


def test_image_pull_backoff_fails_with_the_registry_message_but_err_image_pull_waits() -> None:
    message = 'Back-off pulling image "ghcr.io/x/y:1": 401 Unauthorized'
    backoff = task_state({"waiting": {"reason": "ImagePullBackOff", "message": message}})
    status = allocation_status(
        {}, views(pod(0, conditions=SCHEDULED, containerStatuses=backoff)), 1
    )
    assert status.state == "EXITED"
    assert status.image_failure
    assert message in str(status.reason)
    transient = task_state({"waiting": {"reason": "ErrImagePull", "message": "timeout"}})
    assert (
        allocation_status(
            {}, views(pod(0, conditions=SCHEDULED, containerStatuses=transient)), 1
        ).state
        == "PULLING"
    )


def test_exit_codes_one_failed_pod_fails_the_allocation_all_succeeded_is_zero() -> None:
    done = task_state({"terminated": {"exitCode": 0, "reason": "Completed"}})
    failed = task_state({"terminated": {"exitCode": 3, "reason": "Error", "message": "boom"}})
    status = allocation_status(
        {},
        views(
            pod(0, "Succeeded", containerStatuses=done), pod(1, "Failed", containerStatuses=failed)
        ),
        2,
    )
    assert (status.state, status.exit_code, status.failed_rank) == ("EXITED", 3, 1)
    assert "boom" in str(status.reason)
    ok = allocation_status({}, views(pod(0, "Succeeded", containerStatuses=done)), 1)
    assert (ok.state, ok.exit_code) == ("EXITED", 0)


def test_a_failed_job_without_pods_exits_with_its_condition() -> None:
    job = {
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "too long",
                }
            ]
        }
    }
    status = allocation_status(job, [], 1)
    assert status.state == "EXITED"
    assert status.exit_code is None
    assert "DeadlineExceeded" in str(status.reason)
