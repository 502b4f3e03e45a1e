"""The columns of a project's experiment table and the ranges of its numeric metrics
(Determined's ``GetProjectColumns`` and ``GetProjectNumericMetricsRange``, which the web UI's
experiment table reads).

Columns: the fixed experiment columns, then ``<group>.<metric>.<last|max|mean|min>`` for the
numeric metrics of each experiment's best trial (``.last`` only for other values; a metric
whose type differs between trials is one column of unspecified type), then ``hp.<name>`` for
the hyperparameters of the project's experiments (nested ones joined by dots). Ranges: the
smallest and largest value of each such numeric summary over the best trials, and of their
searcher metric values (``searcherMetricsVal``).

Determined keeps each trial's summary metrics; Stalwart derives them from the trials' live
reports when asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.db.tables import Experiment, MetricReport, User
from stalwart.master.policy import hidden_project_ids
from stalwart.master.services.experiments import best_trials
from stalwart.master.services.metrics import parse_metric_value

__all__ = ["Column", "MetricSummary", "columns", "metric_ranges", "summaries"]

_EXPERIMENT = "LOCATION_TYPE_EXPERIMENT"
_TEXT, _NUMBER, _DATE, _ANY = (
    "COLUMN_TYPE_TEXT",
    "COLUMN_TYPE_NUMBER",
    "COLUMN_TYPE_DATE",
    "COLUMN_TYPE_UNSPECIFIED",
)
_LOCATIONS = {"training": "LOCATION_TYPE_TRAINING", "validation": "LOCATION_TYPE_VALIDATIONS"}
AGGREGATES = ("last", "max", "mean", "min")


@dataclass(frozen=True)
class Column:
    """``v1ProjectColumn``."""

    column: str
    location: str
    type: str
    display_name: str | None = None


_FIXED = [
    Column(name, _EXPERIMENT, kind, display)
    for name, display, kind in (
        ("id", "ID", _NUMBER),
        ("name", "Name", _TEXT),
        ("description", "Description", _TEXT),
        ("tags", "Tags", _TEXT),
        ("forkedFrom", "Forked", _NUMBER),
        ("startTime", "Start time", _DATE),
        ("duration", "Duration", _NUMBER),
        ("numTrials", "Trial count", _NUMBER),
        ("state", "State", _TEXT),
        ("searcherType", "Searcher", _TEXT),
        ("resourcePool", "Resource pool", _TEXT),
        ("progress", "Progress", _NUMBER),
        ("checkpointSize", "Checkpoint size", _NUMBER),
        ("checkpointCount", "Checkpoints", _NUMBER),
        ("user", "User", _TEXT),
        ("searcherMetric", "Searcher Metric", _TEXT),
        ("searcherMetricsVal", "Searcher Metric Value", _NUMBER),
        ("externalExperimentId", "External Experiment ID", _TEXT),
        ("externalTrialId", "External Trial ID", _TEXT),
        ("archived", "Archived", _ANY),
    )
]


@dataclass
class MetricSummary:
    """One metric of one group of a trial: its type and, for numbers, its aggregates."""

    type: str = "number"
    values: list[float] = field(default_factory=list)
    last: Any = None

    def aggregate(self, name: str) -> float | None:
        """``last``, ``max``, ``mean`` or ``min`` of a numeric metric (None otherwise)."""
        if self.type != "number" or not self.values:
            return None
        if name == "last":
            return self.values[-1]
        if name == "max":
            return max(self.values)
        if name == "min":
            return min(self.values)
        return sum(self.values) / len(self.values)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "number" if parse_metric_value(value) is not None else "string"
    if isinstance(value, int | float):
        return "number"
    return "object" if value is not None else "null"


def summaries(
    session: Session, trial_ids: Iterable[int]
) -> dict[int, dict[str, dict[str, MetricSummary]]]:
    """``{trial: {group: {metric: summary}}}`` over the trials' live reports, in step order."""
    ids = sorted(set(trial_ids))
    out: dict[int, dict[str, dict[str, MetricSummary]]] = {i: {} for i in ids}
    if not ids:
        return out
    query = (
        select(MetricReport.trial_id, MetricReport.group, MetricReport.metrics)
        .where(MetricReport.trial_id.in_(ids), MetricReport.archived.is_(False))
        .order_by(MetricReport.trial_id, MetricReport.steps_completed, MetricReport.id)
    )
    for trial_id, group, metrics in session.execute(query):
        found = out[int(trial_id)].setdefault(group, {})
        for name, value in (metrics or {}).items():
            summary = found.setdefault(name, MetricSummary(type=_kind(value)))
            if _kind(value) != summary.type:
                summary.type = "mixed"
            summary.last = value
            number = parse_metric_value(value) if summary.type == "number" else None
            if number is not None:
                summary.values.append(number)
    return out


def _project_experiments(session: Session, user: User, project_id: int) -> list[Experiment]:
    if project_id in hidden_project_ids(session, user):
        return []
    query = select(Experiment).where(Experiment.project_id == project_id).order_by(Experiment.id)
    return list(session.scalars(query))


def _best_summaries(
    session: Session, experiments: list[Experiment]
) -> tuple[list[dict[str, dict[str, MetricSummary]]], list[float]]:
    best = best_trials(session, experiments)
    found = summaries(session, (trial_id for trial_id, _ in best.values()))
    return list(found.values()), [value for _, value in best.values()]


def _hparams(space: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted name, column type)`` of each hyperparameter of a config's space."""
    for name in sorted(space):
        spec = space[name]
        key = f"{prefix}{name}"
        if isinstance(spec, Mapping) and spec.get("type") == "object":
            yield from _hparams(spec.get("vals") or {}, f"{key}.")
        elif isinstance(spec, Mapping) and "type" in spec:
            kind = spec["type"]
            if kind in ("int", "double", "log"):
                yield key, _NUMBER
            elif kind == "const":
                val = spec.get("val")
                numeric = isinstance(val, int | float) and not isinstance(val, bool)
                yield key, _NUMBER if numeric else _TEXT if isinstance(val, str) else _ANY
            else:
                yield key, _ANY
        elif isinstance(spec, Mapping):
            yield from _hparams(spec, f"{key}.")
        else:
            numeric = isinstance(spec, int | float) and not isinstance(spec, bool)
            yield key, _NUMBER if numeric else _TEXT if isinstance(spec, str) else _ANY


def columns(session: Session, user: User, project_id: int) -> list[Column]:
    """The project's experiment-table columns (see the module docstring)."""
    experiments = _project_experiments(session, user, project_id)
    out = list(_FIXED)
    best, _ = _best_summaries(session, experiments)
    types: dict[tuple[str, str], set[str]] = {}
    for trial in best:
        for group, metrics in trial.items():
            for name, summary in metrics.items():
                types.setdefault((group, name), set()).add(summary.type)
    for (group, name), kinds in sorted(types.items()):
        location = _LOCATIONS.get(group, "LOCATION_TYPE_CUSTOM_METRIC")
        kind = next(iter(kinds)) if len(kinds) == 1 else "mixed"
        if kind == "number":
            out.extend(Column(f"{group}.{name}.{a}", location, _NUMBER) for a in AGGREGATES)
        else:
            column_type = _TEXT if kind == "string" else _ANY
            out.append(Column(f"{group}.{name}.last", location, column_type))
    seen: set[str] = set()
    for experiment in experiments:
        for name, kind in _hparams(experiment.config.get("hyperparameters") or {}):
            if name not in seen:
                seen.add(name)
                out.append(Column(f"hp.{name}", "LOCATION_TYPE_HYPERPARAMETERS", kind))
    return out


def metric_ranges(session: Session, user: User, project_id: int) -> list[tuple[str, float, float]]:
    """``(name, min, max)`` of each numeric summary over the project's best trials, sorted by
    name, then ``searcherMetricsVal`` when any best trial has a searcher metric value."""
    best, searcher_values = _best_summaries(
        session, _project_experiments(session, user, project_id)
    )
    values: dict[str, list[float]] = {}
    for trial in best:
        for group, metrics in trial.items():
            for name, summary in metrics.items():
                for aggregate in AGGREGATES:
                    value = summary.aggregate(aggregate)
                    if value is not None:
                        values.setdefault(f"{group}.{name}.{aggregate}", []).append(value)
    out = [(name, min(found), max(found)) for name, found in sorted(values.items())]
    if searcher_values:
        out.append(("searcherMetricsVal", min(searcher_values), max(searcher_values)))
    return out
