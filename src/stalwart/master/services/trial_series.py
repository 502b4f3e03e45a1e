"""Downsampled metrics of several trials side by side (Determined's ``CompareTrials``,
``GET /api/v1/trials/time-series``: the web UI's comparison charts and
``bindings.get_CompareTrials``).

For each trial and each metric group asked for, the reports of the group between two batch
counts, thinned to at most ``max_points`` evenly spaced ones (the first and the last are
always kept), each with the values of the metrics asked for. A group with no such report is
left out, as Determined leaves it out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError
from stalwart.master.db.tables import MetricReport, Trial
from stalwart.master.services.metrics import TRAINING, VALIDATION
from stalwart.master.services.trials import TrialView, trial_views

__all__ = [
    "DEFAULT_POINTS",
    "GroupPoints",
    "Point",
    "compare_trials",
    "group_names",
    "trial_groups",
]

DEFAULT_POINTS = 200
"""Points per group when the request says 0 (Determined's default)."""

_TYPES = {
    "METRIC_TYPE_TRAINING": TRAINING,
    "METRIC_TYPE_VALIDATION": VALIDATION,
    "METRIC_TYPE_PROFILING": "profiling",
}


@dataclass(frozen=True)
class Point:
    """One kept report: its batches, time, epoch (when it reported ``epochs`` or ``epoch``)
    and the values of the metrics asked for that it has."""

    batches: int
    time: dt.datetime
    epoch: float | None
    values: dict[str, Any]


@dataclass(frozen=True)
class GroupPoints:
    """The kept points of one metric group."""

    group: str
    points: list[Point]


def group_names(
    metric_names: Sequence[str], metric_ids: Sequence[str], metric_type: str | None, group: str
) -> dict[str, list[str]]:
    """Which metrics of which group a request asks for: ``metricNames`` of ``group`` (or of
    ``metricType``; of training and validation when neither is given), plus each
    ``metricIds`` entry ``group.name``. 400 for both names and ids, or a malformed id."""
    if metric_names and metric_ids:
        raise InvalidArgumentError(
            "give metricNames (with group) or metricIds (group.name), not both"
        )
    wanted: dict[str, list[str]] = {}
    chosen = group or _TYPES.get(metric_type or "", "")
    if metric_names:
        for name in [chosen] if chosen else [TRAINING, VALIDATION]:
            wanted[name] = list(metric_names)
    for metric_id in metric_ids:
        grp, dot, name = metric_id.partition(".")
        if not dot or not grp or not name:
            raise InvalidArgumentError(
                f"metric id {metric_id!r} is not of the form group.name (e.g. validation.loss)"
            )
        wanted.setdefault(grp, []).append(name)
    return dict(sorted(wanted.items()))


def _epoch(metrics: Mapping[str, Any]) -> float | None:
    for key in ("epochs", "epoch"):
        value = metrics.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _evenly(count: int, keep: int) -> list[int]:
    """At most ``keep`` indices of ``range(count)``, evenly spaced, first and last kept."""
    if count <= keep:
        return list(range(count))
    if keep <= 1:
        return [count - 1]
    step = (count - 1) / (keep - 1)
    return sorted({round(i * step) for i in range(keep)})


def trial_groups(
    session: Session,
    trial_id: int,
    wanted: Mapping[str, Sequence[str]],
    *,
    max_points: int,
    start_batches: int,
    end_batches: int,
) -> list[GroupPoints]:
    """The trial's downsampled points of each group in ``wanted`` (see the module docstring);
    ``end_batches`` 0 means no end."""
    keep = max_points if max_points > 0 else DEFAULT_POINTS
    out = []
    for group, names in wanted.items():
        query = select(
            MetricReport.steps_completed, MetricReport.report_time, MetricReport.metrics
        ).where(
            MetricReport.trial_id == trial_id,
            MetricReport.group == group,
            MetricReport.archived.is_(False),
            MetricReport.steps_completed >= start_batches,
        )
        if end_batches > 0:
            query = query.where(MetricReport.steps_completed <= end_batches)
        rows = []
        for steps, when, metrics in session.execute(
            query.order_by(MetricReport.steps_completed, MetricReport.id)
        ):
            metrics = metrics or {}
            values = {n: metrics[n] for n in names if n in metrics}
            if values:
                rows.append(Point(int(steps), when, _epoch(metrics), values))
        if rows:
            out.append(GroupPoints(group, [rows[i] for i in _evenly(len(rows), keep)]))
    return out


def compare_trials(
    session: Session,
    trial_ids: Sequence[int],
    wanted: Mapping[str, Sequence[str]],
    *,
    max_points: int,
    start_batches: int,
    end_batches: int,
) -> list[tuple[TrialView, list[GroupPoints]]]:
    """Each existing trial of ``trial_ids`` (ascending id) with :func:`trial_groups`."""
    ids = sorted(set(trial_ids))
    rows = list(session.scalars(select(Trial).where(Trial.id.in_(ids)).order_by(Trial.id)))
    return [
        (
            view,
            trial_groups(
                session,
                view.trial.id,
                wanted,
                max_points=max_points,
                start_batches=start_batches,
                end_batches=end_batches,
            ),
        )
        for view in trial_views(session, rows)
    ]
