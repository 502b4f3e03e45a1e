"""Merging config layers the way Determined does: the first non-null value wins.

Layers are raw (JSON-like) mappings, merged before validation so that a template or the task
container defaults can supply what the experiment leaves out:

    experiment > template > resource-pool task_container_defaults > master task_container_defaults

Rules, beyond "mappings merge key by key, and the first non-null value wins":

- union sections (``checkpoint_storage`` by ``type``, ``searcher`` by ``name``) merge key by key
  only when both layers name the same variant; otherwise the first layer's section wins whole;
- ``environment.image`` and ``environment.environment_variables`` are first brought to their
  per-device map form (a plain string or list applies to every device; ``gpu`` means ``cuda``);
  environment variables of both layers are kept, the later layer's first, so the first layer's
  value of a repeated variable is the one that applies;
- ``bind_mounts``: the first layer's mounts, plus the other's whose ``container_path`` differs;
- ``slurm.sbatch_args`` / ``pbs.pbsbatch_args``: the other layer's arguments are *prepended*, so
  the first layer's come later on the command line and win;
- ``log_policies``: union by policy ``name`` (or pattern, for unnamed ones), the first layer's
  policy winning; an explicit empty list takes no policies from later layers;
- a typed hyperparameter (a mapping with ``type``) is atomic: it is never merged key by key;
- everything else that is not a mapping (lists included) is taken whole from the first layer
  that sets it.

``environment.pod_spec`` is taken whole from the first layer; Kubernetes strategic merge of pod
specs belongs to the Kubernetes resource manager.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "DEVICE_KEYS",
    "merge",
    "merge_layers",
    "normalize_device_map",
    "tcd_to_experiment_layer",
]

DEVICE_KEYS = ("cpu", "cuda", "rocm")

Path = tuple[str, ...]


def normalize_device_map(value: Any) -> Any:
    """A plain value becomes ``{cpu: v, cuda: v, rocm: v}``; ``gpu`` becomes ``cuda`` if unset.

    Maps are returned with only device keys that are set; anything else is returned unchanged
    (validation reports it).
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        out = {k: v for k, v in value.items() if k != "gpu"}
        if out.get("cuda") is None and value.get("gpu") is not None:
            out["cuda"] = value["gpu"]
        return out
    if isinstance(value, str | list):
        return {key: copy.deepcopy(value) for key in DEVICE_KEYS}
    return value


def _union_merge(discriminator: str) -> Callable[[Any, Any, Path], Any]:
    def rule(obj: Any, src: Any, path: Path) -> Any:
        if (
            isinstance(obj, Mapping)
            and isinstance(src, Mapping)
            and obj.get(discriminator) not in (None, src.get(discriminator))
        ):
            return copy.deepcopy(dict(obj))
        return _merge_mappings(obj, src, path)

    return rule


def _image_rule(obj: Any, src: Any, path: Path) -> Any:
    return _merge_mappings(normalize_device_map(obj), normalize_device_map(src), path)


def _env_vars_rule(obj: Any, src: Any, path: Path) -> Any:
    o, s = normalize_device_map(obj), normalize_device_map(src)
    if not isinstance(o, Mapping) or not isinstance(s, Mapping):
        return _first(o, s)
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*s, *o]):
        first, later = o.get(key), s.get(key)
        if isinstance(first, list) and isinstance(later, list):
            out[key] = [*later, *first]
        else:
            out[key] = copy.deepcopy(_first(first, later))
    return out


def _bind_mounts_rule(obj: Any, src: Any, path: Path) -> Any:
    if not isinstance(obj, list) or not isinstance(src, list):
        return copy.deepcopy(_first(obj, src))
    taken = {m.get("container_path") for m in obj if isinstance(m, Mapping)}
    extra = [m for m in src if not (isinstance(m, Mapping) and m.get("container_path") in taken)]
    return copy.deepcopy([*obj, *extra])


def _prepend_rule(key: str) -> Callable[[Any, Any, Path], Any]:
    def rule(obj: Any, src: Any, path: Path) -> Any:
        if isinstance(obj, list) and isinstance(src, list):
            return copy.deepcopy([*src, *obj])
        return copy.deepcopy(_first(obj, src))

    return rule


def _policy_key(policy: Any) -> Any:
    if isinstance(policy, Mapping):
        return policy.get("name") or policy.get("pattern")
    return repr(policy)


def _log_policies_rule(obj: Any, src: Any, path: Path) -> Any:
    if not isinstance(obj, list) or not isinstance(src, list) or obj == []:
        return copy.deepcopy(_first(obj, src))
    taken = {_policy_key(p) for p in obj}
    return copy.deepcopy([*obj, *[p for p in src if _policy_key(p) not in taken]])


def _hyperparameters_rule(obj: Any, src: Any, path: Path) -> Any:
    def typed(value: Any) -> bool:
        return isinstance(value, Mapping) and "type" in value

    if isinstance(obj, Mapping) and isinstance(src, Mapping) and not typed(obj) and not typed(src):
        out: dict[str, Any] = {}
        for key in dict.fromkeys([*obj, *src]):
            out[key] = _hyperparameters_rule(obj.get(key), src.get(key), (*path, key))
        return out
    return copy.deepcopy(_first(obj, src))


_RULES: dict[Path, Callable[[Any, Any, Path], Any]] = {
    ("checkpoint_storage",): _union_merge("type"),
    ("searcher",): _union_merge("name"),
    ("environment", "image"): _image_rule,
    ("environment", "environment_variables"): _env_vars_rule,
    ("bind_mounts",): _bind_mounts_rule,
    ("slurm", "sbatch_args"): _prepend_rule("sbatch_args"),
    ("pbs", "pbsbatch_args"): _prepend_rule("pbsbatch_args"),
    ("log_policies",): _log_policies_rule,
    ("hyperparameters",): _hyperparameters_rule,
}


def _first(obj: Any, src: Any) -> Any:
    return src if obj is None else obj


def _merge_mappings(obj: Any, src: Any, path: Path) -> Any:
    if not isinstance(obj, Mapping) or not isinstance(src, Mapping):
        return copy.deepcopy(_first(obj, src))
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*obj, *src]):
        merged = merge(obj.get(key), src.get(key), (*path, str(key)))
        if merged is not None or key in obj or key in src:
            out[key] = merged
    return out


def merge(obj: Any, src: Any, path: Path = ()) -> Any:
    """Merge ``src`` under ``obj`` (obj wins) at ``path`` of the experiment config.

    Inputs are never modified; the result shares no mutable state with them.
    """
    rule = _RULES.get(path)
    if rule is not None and obj is not None and src is not None:
        return rule(obj, src, path)
    if rule is not None and path[-1:] in (("image",), ("environment_variables",)):
        return copy.deepcopy(normalize_device_map(_first(obj, src)))
    return _merge_mappings(obj, src, path)


def merge_layers(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge layers in precedence order (first wins). Missing (None) layers are skipped."""
    result: Any = {}
    for layer in reversed([layer for layer in layers if layer is not None]):
        result = merge(layer, result)
    return dict(result) if isinstance(result, Mapping) else {}


_TCD_TO_EXPERIMENT: dict[str, Path] = {
    "image": ("environment", "image"),
    "registry_auth": ("environment", "registry_auth"),
    "force_pull_image": ("environment", "force_pull_image"),
    "environment_variables": ("environment", "environment_variables"),
    "add_capabilities": ("environment", "add_capabilities"),
    "drop_capabilities": ("environment", "drop_capabilities"),
    "shm_size_bytes": ("resources", "shm_size"),
    "devices": ("resources", "devices"),
    "bind_mounts": ("bind_mounts",),
    "log_policies": ("log_policies",),
    "slurm": ("slurm",),
    "pbs": ("pbs",),
}


def tcd_to_experiment_layer(tcd: Mapping[str, Any] | None, *, gpu: bool) -> dict[str, Any]:
    """The experiment-config layer that master or pool task_container_defaults stand for.

    ``gpu`` picks ``gpu_pod_spec`` over ``cpu_pod_spec`` (Determined picks by
    ``slots_per_trial > 0``). Fields with no experiment-config counterpart (``network_mode``,
    ``work_dir``, ``preemption_timeout``...) are left to the resource managers.
    """
    layer: dict[str, Any] = {}
    if not tcd:
        return layer

    def put(path: Path, value: Any) -> None:
        node = layer
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = copy.deepcopy(value)

    for key, target in _TCD_TO_EXPERIMENT.items():
        if tcd.get(key) is not None:
            put(target, tcd[key])
    pod_spec = tcd.get("gpu_pod_spec" if gpu else "cpu_pod_spec")
    if pod_spec is not None:
        put(("environment", "pod_spec"), pod_spec)
    return layer
