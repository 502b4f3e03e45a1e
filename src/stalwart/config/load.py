"""The one way to turn experiment-config YAML (plus its defaults layers) into a typed config.

    loaded = load_experiment_config(Path("const.yaml"))
    loaded.config.searcher.metric      # typed, fully defaulted
    loaded.warnings                    # deprecated-but-accepted things, as readable lines

Invalid input raises :class:`~stalwart.errors.ConfigError` listing every problem at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stalwart.config.checks import check_experiment
from stalwart.config.experiment import ExperimentConfig
from stalwart.config.loader import LineMap, ParsedDocument, read_yaml
from stalwart.config.merge import merge_layers, tcd_to_experiment_layer
from stalwart.config.policies import DEFAULT_LOG_POLICIES
from stalwart.config.searcher import REMOVED_SEARCHERS
from stalwart.config.validation import Problem, problems_from_error, render_problems
from stalwart.errors import ConfigError

__all__ = [
    "DefaultsLayers",
    "LoadedExperiment",
    "load_experiment_config",
    "merge_experiment_layers",
    "validate_experiment",
]


@dataclass(frozen=True)
class DefaultsLayers:
    """What is merged under a user's experiment config, in precedence order.

    ``template``: a config template's raw mapping; ``pool_tcd`` / ``master_tcd``: raw
    ``task_container_defaults`` of the resource pool and the master; ``checkpoint_storage``:
    the master's checkpoint storage, used when neither experiment nor template sets one.
    """

    template: Mapping[str, Any] | None = None
    pool_tcd: Mapping[str, Any] | None = None
    master_tcd: Mapping[str, Any] | None = None
    checkpoint_storage: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class LoadedExperiment:
    """A valid, fully defaulted experiment config and what the user should be warned about."""

    config: ExperimentConfig
    source: str
    warnings: list[str] = field(default_factory=list)


def merge_experiment_layers(
    experiment: Mapping[str, Any], defaults: DefaultsLayers | None = None
) -> dict[str, Any]:
    """Merge the experiment over its defaults layers (first non-null wins), still raw.

    Raises ConfigError when the experiment or the template is not a mapping.
    """
    d = defaults or DefaultsLayers()
    for name, layer in (("<config>", experiment), ("<template>", d.template)):
        if layer is not None and not isinstance(layer, Mapping):
            raise ConfigError(name, [f"{name}: must be a mapping of experiment settings"])
    slots = _slots_per_trial(experiment, d.template)
    gpu = not isinstance(slots, int) or slots > 0
    storage = {"checkpoint_storage": dict(d.checkpoint_storage)} if d.checkpoint_storage else None
    merged = merge_layers(
        experiment,
        d.template,
        tcd_to_experiment_layer(d.pool_tcd, gpu=gpu),
        tcd_to_experiment_layer(d.master_tcd, gpu=gpu),
        storage,
        {"log_policies": [p.to_dict() for p in DEFAULT_LOG_POLICIES]},
    )
    return _drop_disabled_log_policies(merged)


def _drop_disabled_log_policies(config: dict[str, Any]) -> dict[str, Any]:
    """A named policy without a pattern switches off the policy of that name from below."""
    policies = config.get("log_policies")
    if isinstance(policies, list):
        config["log_policies"] = [
            p
            for p in policies
            if not (isinstance(p, Mapping) and p.get("name") and p.get("pattern") is None)
        ]
    return config


def _slots_per_trial(*layers: Mapping[str, Any] | None) -> Any:
    for layer in layers:
        resources = (layer or {}).get("resources")
        if isinstance(resources, Mapping) and resources.get("slots_per_trial") is not None:
            return resources["slots_per_trial"]
    return 1


def _removed_searcher(data: Mapping[str, Any]) -> list[Problem]:
    searcher = data.get("searcher")
    if isinstance(searcher, Mapping):
        name = searcher.get("name")
        if isinstance(name, str) and name in REMOVED_SEARCHERS:
            return [Problem(("searcher", "name"), REMOVED_SEARCHERS[name])]
    return []


def validate_experiment(
    data: Any,
    *,
    source: str = "<config>",
    lines: LineMap | None = None,
    unmanaged: bool = False,
) -> LoadedExperiment:
    """Validate a (merged) raw experiment config; raise ConfigError with every problem.
    ``unmanaged``: see :func:`~stalwart.config.checks.check_experiment`."""
    if not isinstance(data, Mapping):
        raise ConfigError(source, ["<config>: must be a mapping of experiment settings"])
    problems = _removed_searcher(data)
    if problems:
        data = {k: v for k, v in data.items() if k != "searcher"} | {
            "searcher": {"name": "single", "metric": "-"}
        }
    try:
        config = ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        problems += problems_from_error(exc, ExperimentConfig, data, lines)
        raise ConfigError(source, render_problems(_with_lines(problems, lines))) from None
    result = check_experiment(config, unmanaged=unmanaged)
    problems += result.problems
    if problems:
        raise ConfigError(source, render_problems(_with_lines(problems, lines)))
    return LoadedExperiment(config, source, render_problems(_with_lines(result.warnings, lines)))


def _with_lines(problems: list[Problem], lines: LineMap | None) -> list[Problem]:
    if lines is None:
        return problems
    return [
        p if p.line is not None else Problem(p.path, p.message, lines.line_of(p.path))
        for p in problems
    ]


def load_experiment_config(
    path: Path | ParsedDocument, defaults: DefaultsLayers | None = None, *, unmanaged: bool = False
) -> LoadedExperiment:
    """Read, merge with ``defaults`` and validate one experiment-config file (``unmanaged``:
    see :func:`~stalwart.config.checks.check_experiment`)."""
    doc = path if isinstance(path, ParsedDocument) else read_yaml(path)
    if not isinstance(doc.data, Mapping):
        raise ConfigError(doc.source, ["<config>: must be a mapping of experiment settings"])
    merged = merge_experiment_layers(doc.data, defaults)
    return validate_experiment(merged, source=doc.source, lines=doc.lines, unmanaged=unmanaged)
