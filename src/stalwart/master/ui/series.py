"""What the UI's charts read: metric names per group, and whole groups of a trial downsampled.

Contract:

- A report's metrics may nest dicts (the profiler reports ``{agent_id: {"cpu_util_simple": x}}``
  and ``{agent_id: {uuid: {"gpu_util": x}}}``). :func:`flatten` names each numeric leaf by its
  path joined with ``/`` (``a1/cpu_util_simple``); values that are not finite numbers are left
  out, as the series endpoints of the trial API do.
- :func:`metric_names` reads only the first and the last live report of each (trial, group) (two
  index lookups each), so it stays cheap with 10,000 reports per trial; a metric that appears
  only in the middle of a series is not listed. It takes two queries however many trials.
- :class:`SeriesCache` answers one metric of many trials: a long series from its stored
  rollups (:mod:`stalwart.master.services.series_store`: about ``2 * max_points`` rows a trial,
  thinned with LTTB), a short one with :func:`experiment_metric_series` (one query of two
  columns for all such trials; the database extracts the value as text). It keeps downsampled
  series per (trial, group, metric, points) with the version they were read at (the series'
  stored count and newest report id): a poll of a finished search reads one small row per
  trial.
- :func:`trial_group_series` reads every live report of one group of one trial in step order
  and keeps at most ``max_points`` points of each flattened metric (largest-triangle-three-
  buckets, :func:`stalwart.master.services.metrics.downsample_lttb`).
"""

from __future__ import annotations

import datetime as dt
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, aliased

from stalwart.master.db.tables import MetricReport, Trial
from stalwart.master.services import metrics as metrics_svc
from stalwart.master.services import series_store

__all__ = [
    "Downsampled",
    "GroupSeries",
    "SeriesCache",
    "experiment_metric_series",
    "flatten",
    "flatten_paths",
    "metric_names",
    "to_float",
    "trial_group_series",
]

SEPARATOR = "/"
"""Joins the keys of a nested metric into one name."""

MAX_DEPTH = 4
"""Nesting deeper than this is ignored (the profiler nests two levels)."""

IDS_PER_QUERY = 10_000
"""Report ids bound in one ``IN`` list (SQLite allows 32,766 parameters): one more query per
5,000 (trial, group) pairs."""


def flatten(metrics: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """``(name, value)`` of each finite numeric leaf of ``metrics``, nested keys joined by ``/``."""
    for path, value in flatten_paths(metrics):
        yield SEPARATOR.join(path), value


def flatten_paths(
    metrics: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], float]]:
    """``(keys, value)`` of each finite numeric leaf of ``metrics`` (keys from the top)."""
    for key, raw in metrics.items():
        path = (*prefix, str(key))
        if isinstance(raw, Mapping):
            if len(path) <= MAX_DEPTH:
                yield from flatten_paths(raw, path)
            continue
        value = metrics_svc.parse_metric_value(raw)
        if value is not None and math.isfinite(value):
            yield path, value


def to_float(raw: Any) -> float | None:
    """A finite float from a number or its text (what the JSON extraction answers); None for
    anything else (NaN, infinities, strings that are not numbers, null)."""
    if raw is None or isinstance(raw, bool):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def experiment_metric_series(
    session: Session, trial_ids: Sequence[int], group: str, metric: str
) -> dict[int, GroupSeries]:
    """``metric`` (a top-level key) of ``group`` for each of ``trial_ids``, in step order."""
    out = {trial_id: GroupSeries(metric) for trial_id in trial_ids}
    if not trial_ids:
        return out
    # A name with a quote or a backslash cannot go into a JSON path: read whole reports then.
    narrow = '"' not in metric and "\\" not in metric
    value = MetricReport.metrics[metric].as_string() if narrow else MetricReport.metrics
    query = (
        select(MetricReport.trial_id, MetricReport.steps_completed, value)
        .where(
            MetricReport.trial_id.in_(list(trial_ids)),
            MetricReport.group == group,
            MetricReport.archived.is_(False),
        )
        .order_by(MetricReport.trial_id, MetricReport.steps_completed, MetricReport.id)
    )
    for trial_id, steps, raw in session.execute(query):
        number = to_float(raw if narrow else (raw or {}).get(metric))
        if number is not None:
            series = out[trial_id]
            series.batches.append(int(steps))
            series.values.append(number)
    return out


def metric_names(session: Session, trial_ids: Iterable[int] | Select[Any]) -> dict[str, list[str]]:
    """Group -> sorted flattened metric names, over the trials' first and last live reports.

    ``trial_ids``: ids, or a query of them (an experiment's trials). Two queries whatever the
    number of trials (up to 5,000 (trial, group) pairs; one more per 5,000): the first lists
    each (trial, group) of the reports (:func:`_groups_of`: a skip scan of the series index)
    with the ids of its first and last live report (by step, then id: two index lookups each,
    as correlated subqueries); the second reads those reports' metrics.
    """
    ids = trial_ids if isinstance(trial_ids, Select) else sorted(set(trial_ids))
    if not isinstance(ids, Select) and not ids:
        return {}
    r = aliased(MetricReport)
    pairs = _groups_of(ids)

    def end(*order: Any) -> Any:
        return (
            select(r.id)
            .where(r.trial_id == pairs.c.trial_id, r.group == pairs.c.group, r.archived.is_(False))
            .order_by(*order)
            .limit(1)
            .scalar_subquery()
        )

    ends = session.execute(
        select(
            pairs.c.group,
            end(r.steps_completed, r.id),
            end(r.steps_completed.desc(), r.id.desc()),
        )
    ).all()
    wanted = sorted({rid for _, *both in ends for rid in both if rid is not None})
    names: dict[str, set[str]] = {group: set() for group, first, _ in ends if first is not None}
    for start in range(0, len(wanted), IDS_PER_QUERY):
        query = select(MetricReport.group, MetricReport.metrics).where(
            MetricReport.id.in_(wanted[start : start + IDS_PER_QUERY])
        )
        for group, metrics in session.execute(query):
            names[group].update(name for name, _ in flatten(metrics or {}))
    return {group: sorted(found) for group, found in sorted(names.items())}


def _groups_of(ids: Sequence[int] | Select[Any]) -> Any:
    """``(trial_id, group)`` of each group the trials reported, as a subquery: a skip scan of
    the series index (each trial's first group, then the next group after it, one index seek
    each, in a recursive query), not a read of every report's index entry (a million of them
    for a search of 100 trials x 10,000 reports)."""
    m = aliased(MetricReport)

    def next_group(trial_id: Any, after: Any | None) -> Any:
        query = select(m.group).where(m.trial_id == trial_id)
        if after is not None:
            query = query.where(m.group > after)
        return query.order_by(m.group).limit(1).scalar_subquery()

    found = (
        select(Trial.id.label("trial_id"), next_group(Trial.id, None).label("grp"))
        .where(Trial.id.in_(ids))
        .cte("trial_groups", recursive=True)
    )
    found = found.union_all(
        select(found.c.trial_id, next_group(found.c.trial_id, found.c.grp)).where(
            found.c.grp.is_not(None)
        )
    )
    return (
        select(found.c.trial_id, found.c.grp.label("group"))
        .where(found.c.grp.is_not(None))
        .subquery()
    )


@dataclass
class GroupSeries:
    """One flattened metric of a group: every point's step and value (before downsampling)."""

    name: str
    path: tuple[str, ...] = ()
    batches: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    """Each point's report time (seconds since the Unix epoch, UTC)."""
    epochs: list[float | None] = field(default_factory=list)
    """Each point's report's top-level ``epoch`` (or ``epochs``) value, None without one."""

    def kept(self, max_points: int) -> list[int]:
        """The indices of at most ``max_points`` points, keeping the curve's shape."""
        pairs = [(float(b), v) for b, v in zip(self.batches, self.values, strict=True)]
        return metrics_svc.downsample_lttb(pairs, max_points)

    def downsampled(self, max_points: int) -> tuple[list[int], list[float]]:
        """At most ``max_points`` of the points, keeping the curve's shape."""
        keep = self.kept(max_points)
        return [self.batches[i] for i in keep], [self.values[i] for i in keep]


def trial_group_series(
    session: Session, trial_id: int, group: str, only: Sequence[str] = ()
) -> list[GroupSeries]:
    """Each flattened metric of ``group`` of the trial (only those in ``only`` when given), in
    step order, sorted by name."""
    wanted = set(only)
    query = select(
        MetricReport.steps_completed, MetricReport.metrics, MetricReport.report_time
    ).where(
        MetricReport.trial_id == trial_id,
        MetricReport.group == group,
        MetricReport.archived.is_(False),
    )
    out: dict[str, GroupSeries] = {}
    for steps, metrics, reported in session.execute(
        query.order_by(MetricReport.steps_completed, MetricReport.id)
    ):
        when = _seconds(reported)
        epoch = _epoch(metrics or {})
        for path, value in flatten_paths(metrics or {}):
            name = SEPARATOR.join(path)
            if wanted and name not in wanted:
                continue
            series = out.get(name)
            if series is None:
                series = out[name] = GroupSeries(name, path)
            series.batches.append(int(steps))
            series.values.append(value)
            series.times.append(when)
            series.epochs.append(epoch)
    return [out[name] for name in sorted(out)]


def _seconds(moment: dt.datetime) -> float:
    """``moment`` in seconds since the Unix epoch (a naive time is UTC, as the master stores it)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def _epoch(metrics: Mapping[str, Any]) -> float | None:
    """The report's ``epoch`` (or ``epochs``) value when it is a number."""
    for key in ("epoch", "epochs"):
        if key in metrics:
            return to_float(metrics[key])
    return None


@dataclass(frozen=True)
class Downsampled:
    """A downsampled series and how many numeric points it was cut from."""

    total: int
    batches: list[int]
    values: list[float]


class SeriesCache:
    """Least-recently-used downsampled series, valid while their trial's group is unchanged;
    at most ``size`` series and ``max_points`` points in all (about 64 bytes a point)."""

    def __init__(self, size: int = 4096, max_points: int = 1_000_000) -> None:
        self._size = size
        self._max_points = max_points
        self._points = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[Any, ...], tuple[tuple[int, int], Downsampled]] = (
            OrderedDict()
        )

    def experiment(
        self,
        session: Session,
        trial_ids: Sequence[int],
        group: str,
        metric: str,
        max_points: int,
    ) -> dict[int, Downsampled]:
        """``metric`` of ``group`` per trial, at most ``max_points`` each (read when stale):
        a long series from its stored rollups, a short one (or one of a trial not built yet,
        which is not cached) from its reports."""
        versions = series_store.series_versions(session, trial_ids, group, metric)
        out: dict[int, Downsampled] = {}
        stale: list[int] = []
        with self._lock:
            for trial_id in trial_ids:
                key = (trial_id, group, metric, max_points)
                hit = self._items.get(key)
                if hit is not None and hit[0] == versions.get(trial_id):
                    self._items.move_to_end(key)
                    out[trial_id] = hit[1]
                else:
                    stale.append(trial_id)
        rolled = series_store.rolled_series(
            session, {t: versions[t] for t in stale if t in versions}, group, metric, max_points
        )
        fresh: dict[int, Downsampled] = {}
        for trial_id, found in rolled.items():
            keep = found.kept(max_points)
            fresh[trial_id] = Downsampled(
                found.total, [found.steps[i] for i in keep], [found.values[i] for i in keep]
            )
        raw = [t for t in stale if t not in rolled]
        for trial_id, series in experiment_metric_series(session, raw, group, metric).items():
            batches, values = series.downsampled(max_points)
            fresh[trial_id] = Downsampled(len(series.batches), batches, values)
        out.update(fresh)
        with self._lock:
            for trial_id, item in fresh.items():
                version = versions.get(trial_id)
                if version is None:
                    continue  # not built yet: no version to check it against
                key = (trial_id, group, metric, max_points)
                previous = self._items.pop(key, None)
                if previous is not None:
                    self._points -= len(previous[1].batches)
                self._items[key] = (version, item)
                self._points += len(item.batches)
            while self._items and (
                len(self._items) > self._size or self._points > self._max_points
            ):
                _, (_, dropped) = self._items.popitem(last=False)
                self._points -= len(dropped.batches)
        return out
