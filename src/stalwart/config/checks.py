"""Rules that span several fields, run on a config that passed field validation.

:func:`check_experiment` returns problems (the config is invalid) and warnings (it is valid but
uses something deprecated or without effect). Each problem names the path a user must edit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stalwart.config.hyperparameters import (
    DoubleHyperparameter,
    IntHyperparameter,
    LogHyperparameter,
)
from stalwart.config.loader import DataPath
from stalwart.config.searcher import ASHA_SEARCHERS
from stalwart.config.validation import Problem

if TYPE_CHECKING:
    from stalwart.config.experiment import ExperimentConfig

__all__ = ["CheckResult", "check_experiment", "iter_hyperparameters"]


@dataclass
class CheckResult:
    """Problems make the config invalid; warnings are shown but accepted."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def iter_hyperparameters(
    hps: Mapping[str, Any], prefix: DataPath = ("hyperparameters",)
) -> Iterator[tuple[DataPath, Any]]:
    """Every leaf hyperparameter with its path, descending into nested groups."""
    for name, hp in hps.items():
        if isinstance(hp, Mapping):
            yield from iter_hyperparameters(hp, (*prefix, name))
        else:
            yield (*prefix, name), hp


def check_experiment(config: ExperimentConfig, *, unmanaged: bool = False) -> CheckResult:
    """Cross-field rules of Determined's experiment config (and Stalwart's additions).
    ``unmanaged``: the config of an experiment run outside the cluster (the SDK's detached
    mode), which needs no entrypoint."""
    result = CheckResult()
    searcher = config.searcher
    numeric = (IntHyperparameter, DoubleHyperparameter, LogHyperparameter)

    if searcher.name == "grid":
        for path, hp in iter_hyperparameters(config.hyperparameters):
            if isinstance(hp, numeric) and hp.count is None:
                result.problems.append(
                    Problem(
                        (*path, "count"),
                        f"the grid searcher needs 'count' on {hp.type} "
                        "hyperparameters (how many grid points)",
                    )
                )

    if searcher.name in ASHA_SEARCHERS:
        max_time = getattr(searcher, "max_time", None)
        time_metric = getattr(searcher, "time_metric", None)
        if searcher.max_length is None and (max_time is None or time_metric is None):
            missing = "time_metric" if max_time is not None else "max_time"
            result.problems.append(
                Problem(
                    ("searcher", missing),
                    f"{searcher.name} needs max_time and time_metric (how long trials train, "
                    "in units of a metric they report), or the legacy max_length",
                )
            )
        if getattr(searcher, "stop_once", False):
            result.warnings.append(
                Problem(("searcher", "stop_once"), "stop_once is deprecated and has no effect")
            )

    if searcher.max_length is not None:
        result.warnings.append(
            Problem(
                ("searcher", "max_length"),
                "max_length is deprecated since Determined 0.38; set the training length in "
                "your script and, for ASHA searchers, max_time and time_metric",
            )
        )

    if searcher.source_trial_id is not None and searcher.source_checkpoint_uuid is not None:
        result.problems.append(
            Problem(
                ("searcher", "source_checkpoint_uuid"),
                "set at most one of source_trial_id and source_checkpoint_uuid",
            )
        )

    resources = config.resources
    if resources.max_slots is not None and resources.slots_per_trial > resources.max_slots:
        result.problems.append(
            Problem(
                ("resources", "slots_per_trial"),
                f"slots_per_trial ({resources.slots_per_trial}) is more than max_slots "
                f"({resources.max_slots}); no trial could ever be scheduled",
            )
        )

    if config.entrypoint is None and not unmanaged:
        result.problems.append(
            Problem(
                ("entrypoint",),
                "required: the command that starts training, e.g. 'python3 train.py' "
                "or a legacy 'model_def:MyTrial'",
            )
        )
    return result
