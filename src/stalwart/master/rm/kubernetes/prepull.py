"""The image pre-pull DaemonSet of a pool (pure builder) and its name.

:func:`daemonset_manifest` renders a pool's pre-pull plan
(:func:`stalwart.environments.prepull.prepull_plan`) as an ``apps/v1`` DaemonSet: one init
container per image (``imagePullPolicy: IfNotPresent``, command ``sh -c "exit 0"``, tiny
requests), then a pause container that holds the pod. The kubelet of every matching node
therefore pulls every image once, before any trial needs it. The pull happens before the command
runs, so an image without ``sh`` has still been pulled when its init container fails (the pod
then retries, which pulls nothing again).

The pod template carries a hash of the image list as an annotation so a changed plan rolls the
DaemonSet (``RollingUpdate``), and :func:`plan_hash` lets the manager skip identical updates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from stalwart.master.rm.kubernetes.manifests import LABEL_PREFIX, MANAGED_BY, dns_name, label_value

__all__ = ["PLAN_ANNOTATION", "PREPULL_LABEL", "daemonset_manifest", "daemonset_name", "plan_hash"]

PREPULL_LABEL = LABEL_PREFIX + "prepull-pool"
PLAN_ANNOTATION = LABEL_PREFIX + "prepull-plan"


def daemonset_name(pool: str) -> str:
    """The pre-pull DaemonSet's name for ``pool``."""
    return dns_name(pool, prefix="stalwart-prepull-")


def plan_hash(images: Sequence[str]) -> str:
    """A short hash of the image list (the DaemonSet's plan annotation)."""
    return hashlib.sha256(json.dumps(list(images)).encode()).hexdigest()[:16]


def daemonset_manifest(
    pool: str,
    images: Sequence[str],
    *,
    namespace: str,
    pause_image: str,
    node_selector: Mapping[str, str] | None = None,
    priority_class: str | None = None,
    pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The pre-pull DaemonSet of ``pool`` for ``images`` (see the module docstring)."""
    labels = {**MANAGED_BY, PREPULL_LABEL: label_value(pool)}
    init = [
        {
            "name": f"pull-{i}",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "exit 0"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }
        for i, image in enumerate(images)
    ]
    spec: dict[str, Any] = {
        "initContainers": init,
        "containers": [
            {
                "name": "pause",
                "image": pause_image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "requests": {"cpu": "1m", "memory": "8Mi"},
                    "limits": {"cpu": "10m", "memory": "32Mi"},
                },
            }
        ],
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"operator": "Exists"}],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if priority_class:
        spec["priorityClassName"] = priority_class
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in pull_secrets]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": daemonset_name(pool), "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {PREPULL_LABEL: label_value(pool)}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {PLAN_ANNOTATION: plan_hash(images)},
                },
                "spec": spec,
            },
        },
    }
