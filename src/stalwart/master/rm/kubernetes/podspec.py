"""Pod specs merged the way ``kubectl apply`` merges them (strategic merge), pure functions.

:func:`strategic_merge` merges a patch into a base PodSpec (both plain JSON-like mappings):
mappings merge key by key, a ``None`` value deletes the key, scalars and lists without a merge
key are replaced, and the lists Kubernetes merges by a key (containers and init containers by
``name``, volumes by ``name``, env by ``name``, volume mounts by ``mountPath``, ports by
``containerPort``, image pull secrets by ``name``...) merge element by element, the patch's
elements updating the base's of the same key and new ones appended in order.

:func:`fold_user_container` applies Kubernetes' sidecar rule to a user's pod spec and
Stalwart's task container: a user container named like ours (:data:`TASK_CONTAINER`) is folded
into ours (its env, envFrom, volume mounts and devices are added; its resources only where ours
sets none; everything Stalwart decides, command and image included, stays Stalwart's). The user's
other containers stay as sidecars.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MERGE_KEYS", "TASK_CONTAINER", "fold_user_container", "strategic_merge"]

TASK_CONTAINER = "stalwart-task"
"""The name of the container that runs the task in every task pod."""

MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
}
"""PodSpec list fields that strategic merge merges by a key (Kubernetes' patchMergeKey)."""


def _merge_list(base: Sequence[Any], patch: Sequence[Any], key: str) -> list[Any]:
    out = [copy.deepcopy(item) for item in base]
    index = {
        item.get(key): i for i, item in enumerate(out) if isinstance(item, Mapping) and key in item
    }
    for item in patch:
        if isinstance(item, Mapping) and item.get(key) in index:
            i = index[item[key]]
            out[i] = strategic_merge(out[i], item)
        else:
            out.append(copy.deepcopy(item))
            if isinstance(item, Mapping) and key in item:
                index[item[key]] = len(out) - 1
    return out


def strategic_merge(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` merged into ``base`` (see the module docstring); neither is modified."""
    out: dict[str, Any] = copy.deepcopy(dict(base))
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
            continue
        current = out.get(name)
        key = MERGE_KEYS.get(name)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[name] = strategic_merge(current, value)
        elif key is not None and isinstance(value, list) and isinstance(current, list):
            out[name] = _merge_list(current, value, key)
        else:
            out[name] = copy.deepcopy(value)
    return out


_ADDED_LISTS = ("env", "envFrom", "volumeMounts", "volumeDevices")


def fold_user_container(ours: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """Stalwart's task container with the user's same-named container folded in (see the
    module docstring). Entries of ours win over the user's of the same key (an env variable of
    the task contract cannot be overridden by a pod spec)."""
    out: dict[str, Any] = copy.deepcopy(dict(ours))
    for field in _ADDED_LISTS:
        extra = user.get(field)
        if not extra:
            continue
        key = MERGE_KEYS.get(field)
        mine = list(out.get(field) or [])
        taken = {item.get(key) for item in mine if key and isinstance(item, Mapping)}
        for item in extra:
            if key and isinstance(item, Mapping) and item.get(key) in taken:
                continue
            mine.append(copy.deepcopy(item))
        out[field] = mine
    user_resources = user.get("resources")
    if isinstance(user_resources, Mapping):
        resources = dict(out.get("resources") or {})
        for part in ("limits", "requests"):
            theirs = user_resources.get(part)
            if not isinstance(theirs, Mapping):
                continue
            mine_part = dict(resources.get(part) or {})
            for name, quantity in theirs.items():
                mine_part.setdefault(name, quantity)
            resources[part] = mine_part
        out["resources"] = resources
    for field in ("securityContext", "lifecycle", "livenessProbe", "readinessProbe"):
        if field in user and field not in out:
            out[field] = copy.deepcopy(user[field])
    return out
