"""What the ingest keeps for reading: each trial's ``summaryMetrics`` and its stored series.

A trial list and a chart of long trials used to decode every stored report (a million JSON
documents for 100 trials x 10,000 reports: seconds per cold read). The ingest now keeps, in the
transaction that stores the reports (:func:`add_reports`, called by
:func:`stalwart.master.services.metrics.report_metrics_many`):

- ``trials.summary_metrics``: Determined's summary object
  (:mod:`stalwart.master.services.summary_metrics`), folded report by report in arrival order,
  as Determined updates ``runs.summary_metrics``.
- ``metric_series``: per (trial, group, top-level metric) the number of its finite values
  (ints and floats; not booleans, not the ``"NaN"``/``"Infinity"`` markers) and the newest
  report id among them. Each value's **ordinal** is its position in arrival order.
- ``metric_rollups``: per series, level ``L`` in 1..:data:`LEVELS` and bucket ``b``, the values
  with ``ordinal // FANOUT**L == b``: count, sum, and the first, smallest, largest and last
  value, each with its steps and report id (ties keep the earlier value). A bucket holds at most
  ``FANOUT**L`` values, so a chart of ``n`` points reads about ``n`` rows at the right level, not
  every report (:func:`rolled_series`, M4 aggregation: first, min, max and last per bucket keep a
  line's shape; the caller thins them with LTTB).

Invariants: the stored data covers exactly the trial's live (non-archived) reports. A rollback
(a restarted run archives later reports) rebuilds the trial's data from its live reports
(:func:`rebuild`), in the same transaction. ``summary_metrics`` NULL means "not built": trials
from before migration 0021 and trials whose reports the importer wrote (a new trial starts built
and empty, ``{}``: it has no reports). Their next report (:func:`add_reports`) builds them, and
so does the cluster loop, a few trials a round (:func:`build_pending`, serialized with the
ingest: SQLite's ingest lock, PostgreSQL's trial row locks); until then reads compute what they
need from the reports, as before 0021.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from sqlalchemy import bindparam, case, delete, null, select, update
from sqlalchemy.orm import Session

from stalwart.master.db.bulk import execute_many, upsert_of
from stalwart.master.db.tables import MetricReport, MetricRollup, MetricSeries, Trial
from stalwart.master.services.summary_metrics import fold, fold_numbers, takes_numbers

__all__ = [
    "FANOUT",
    "LEVELS",
    "RolledSeries",
    "add_reports",
    "build_pending",
    "forget",
    "level_for",
    "rebuild",
    "rolled_series",
    "series_versions",
    "stored_summaries",
]

FANOUT = 8
"""Values per bucket grow by this factor per level (level 1: 8 values, level 2: 64, ...)."""

LEVELS = 6
"""The coarsest level (262,144 values a bucket): a chart of 200 points reads at most about 400
rows for series of up to 100 million values."""

_IDS_PER_QUERY = 500
"""Trial ids bound in one ``IN`` list."""

_R = MetricRollup
_S = MetricSeries
_ROLLUPS = MetricRollup.metadata.tables[MetricRollup.__tablename__]
_SERIES = MetricSeries.metadata.tables[MetricSeries.__tablename__]

Point = tuple[float, int, int]
"""A value with its steps and report id."""


@dataclass
class _Bucket:
    """Consecutive values of a series aggregated: a rollup row being built."""

    count: int
    sum: float
    first: Point
    min: Point
    max: Point
    last: Point

    def add(self, other: _Bucket) -> None:
        """Fold ``other`` (the values after this bucket's) into this one."""
        self.count += other.count
        self.sum += other.sum
        if other.min[0] < self.min[0]:
            self.min = other.min
        if other.max[0] > self.max[0]:
            self.max = other.max
        self.last = other.last


SeriesKey = tuple[int, str, str]
"""(trial id, group, metric)."""


@dataclass
class _Columns:
    """New values of one series in arrival order, with each one's steps and report id."""

    values: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    reports: list[int] = field(default_factory=list)

    def point(self, at: int) -> Point:
        return (self.values[at], self.steps[at], self.reports[at])


def _rollups(key: SeriesKey, start: int, new: _Columns) -> list[tuple[Any, ...]]:
    """The rollup rows (:data:`_ROLLUP_COLUMNS` order) of the new values of a series whose
    first new value has ordinal ``start``, per level and bucket, of these values only: the
    upsert merges them with what is stored."""
    rows: list[tuple[Any, ...]] = []
    # level 1 from the values (a slice per bucket), each next level from the one below
    current: dict[int, _Bucket] = {}
    values = new.values
    at = 0
    while at < len(values):
        bucket = (start + at) // FANOUT
        end = min(len(values), (bucket + 1) * FANOUT - start)
        part = values[at:end]
        low = at + part.index(min(part))  # the first of equal values: the earlier
        high = at + part.index(max(part))
        current[bucket] = _Bucket(
            end - at, sum(part), new.point(at), new.point(low), new.point(high), new.point(end - 1)
        )
        at = end
    for level in range(1, LEVELS + 1):
        head = (*key, level)
        for bucket, b in current.items():
            rows.append((*head, bucket, b.count, b.sum, *b.first, *b.min, *b.max, *b.last))
        upper: dict[int, _Bucket] = {}
        for bucket, b in current.items():  # in bucket order (dicts keep insertion order)
            parent = upper.get(bucket // FANOUT)
            if parent is None:
                upper[bucket // FANOUT] = _Bucket(b.count, b.sum, b.first, b.min, b.max, b.last)
            else:
                parent.add(b)
        current = upper
    return rows


_POINT_PARTS = ("value", "steps", "report")
_ROLLUP_COLUMNS = (
    "trial_id",
    "group",
    "name",
    "level",
    "bucket",
    "count",
    "sum",
    *(f"{p}_{part}" for p in ("first", "min", "max", "last") for part in _POINT_PARTS),
)
"""The order of a rollup row's values (a :data:`Point` is ``(value, steps, report)``)."""
_SERIES_COLUMNS = ("trial_id", "group", "name", "points", "newest_report")


def _rollup_upsert(dialect: str) -> Any:
    t = _ROLLUPS.c
    stmt = upsert_of(dialect, _ROLLUPS)
    new = stmt.excluded

    def take(name: str, better: Any) -> dict[str, Any]:
        return {
            f"{name}_{part}": case(
                (better, getattr(new, f"{name}_{part}")), else_=getattr(t, f"{name}_{part}")
            )
            for part in _POINT_PARTS
        }

    return stmt.on_conflict_do_update(
        index_elements=[t.trial_id, t.group, t.name, t.level, t.bucket],
        set_={
            "count": t.count + new.count,
            "sum": t.sum + new.sum,
            **take("min", new.min_value < t.min_value),
            **take("max", new.max_value > t.max_value),
            "last_value": new.last_value,
            "last_steps": new.last_steps,
            "last_report": new.last_report,
        },
    )


def _series_upsert(dialect: str) -> Any:
    t = _SERIES.c
    stmt = upsert_of(dialect, _SERIES)
    new = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=[t.trial_id, t.group, t.name],
        set_={"points": t.points + new.points, "newest_report": new.newest_report},
    )


Report = tuple[int, int, str, int, Mapping[str, Any] | None]
"""(report id, trial id, group, steps, metrics), as stored."""


@dataclass
class _Parsed:
    """A batch of reports read once: each (trial, group)'s finite values per metric in arrival
    order, each (trial, group)'s latest report, and the trials with any other value (booleans,
    text, non-finite numbers, nested objects), whose summaries are folded report by report."""

    series: dict[tuple[int, str], dict[str, _Columns]] = field(default_factory=dict)
    latest: dict[tuple[int, str], Mapping[str, Any]] = field(default_factory=dict)
    irregular: set[int] = field(default_factory=set)

    def add(self, trial_id: int, group: str, name: str) -> _Columns:
        found = self.series.setdefault((trial_id, group), {})
        columns = found.get(name)
        if columns is None:
            columns = found[name] = _Columns()
        return columns


def _parse(reports: Sequence[Report]) -> _Parsed:
    """Read a batch a run at a time: consecutive reports of one (trial, group) with the same
    metric names are turned into columns by C code (``itemgetter``, ``zip``, ``map``), and a
    column of plain finite numbers (the usual case) is taken whole; only other columns are
    read value by value."""
    out = _Parsed()
    at = 0
    while at < len(reports):
        _, trial_id, group, _, metrics = reports[at]
        names = (metrics or {}).keys()
        end = at + 1
        while (
            end < len(reports)
            and reports[end][1] == trial_id
            and reports[end][2] == group
            and (reports[end][4] or {}).keys() == names
        ):
            end += 1
        run = reports[at:end]
        out.latest[(trial_id, group)] = run[-1][4] or {}
        if names:
            _parse_run(out, trial_id, group, list(names), run)
        at = end
    return out


def _parse_run(
    out: _Parsed, trial_id: int, group: str, names: list[str], run: Sequence[Report]
) -> None:
    steps = [r[3] for r in run]
    ids = [r[0] for r in run]
    dicts = [r[4] or {} for r in run]
    rows = [(d[names[0]],) for d in dicts] if len(names) == 1 else map(itemgetter(*names), dicts)
    for name, column in zip(names, zip(*rows, strict=True), strict=True):
        kinds = set(map(type, column))
        numbers: list[float] | None = None
        if kinds <= {float, int}:
            try:
                numbers = list(map(float, column)) if int in kinds else list(column)
            except OverflowError:  # an int too large for a float
                numbers = None
            if numbers is not None and sum(numbers) - sum(numbers) != 0:  # NaN or infinite
                numbers = None
        target = out.add(trial_id, group, name)
        if numbers is not None:
            target.values.extend(numbers)
            target.steps.extend(steps)
            target.reports.extend(ids)
            continue
        out.irregular.add(trial_id)
        for raw, step, report_id in zip(column, steps, ids, strict=True):
            value = _finite(raw)
            if value is not None:
                target.values.append(value)
                target.steps.append(step)
                target.reports.append(report_id)
    for name in [n for n, c in out.series[(trial_id, group)].items() if not c.values]:
        del out.series[(trial_id, group)][name]  # a metric without one finite value: no series


def _finite(raw: Any) -> float | None:
    """A finite float from an int or float (not a bool); None for anything else."""
    if type(raw) not in (int, float):
        return None
    try:
        value = float(raw)
    except OverflowError:
        return None
    return value if value - value == 0 else None


def _store(session: Session, parsed: _Parsed, starts: Mapping[SeriesKey, int]) -> None:
    """Rollups and series counts of the parsed values, after ``starts`` values per series."""
    rollups: list[tuple[Any, ...]] = []
    series: list[tuple[Any, ...]] = []
    for (trial_id, group), found in parsed.series.items():
        for name, columns in found.items():
            key = (trial_id, group, name)
            rollups.extend(_rollups(key, starts.get(key, 0), columns))
            series.append((*key, len(columns.values), columns.reports[-1]))
    execute_many(session, _series_upsert, _SERIES_COLUMNS, series)
    execute_many(session, _rollup_upsert, _ROLLUP_COLUMNS, rollups)


def _summarized(
    summary: dict[str, Any], trial_id: int, reports: Sequence[Report], parsed: _Parsed
) -> dict[str, Any]:
    """``summary`` (changed in place) with the trial's reports of the batch added: per group
    and metric at once when they are plain numbers, else report by report."""
    groups = [(group, found) for (t, group), found in parsed.series.items() if t == trial_id]
    if trial_id in parsed.irregular or not all(
        takes_numbers(summary, group, found) for group, found in groups
    ):
        return fold(summary, [(r[2], r[4]) for r in reports if r[1] == trial_id])
    for group, found in groups:
        numbers = {name: columns.values for name, columns in found.items()}
        fold_numbers(summary, group, numbers, parsed.latest[(trial_id, group)])
    return summary


_TRIALS = Trial.metadata.tables[Trial.__tablename__]
_SET_SUMMARY = (
    update(_TRIALS)
    .where(_TRIALS.c.id == bindparam("trial"))
    .values(summary_metrics=bindparam("summary", type_=_TRIALS.c.summary_metrics.type))
)
"""Set trials' stored summaries (a Core statement: executed with many rows)."""


def add_reports(session: Session, reports: Sequence[Report], rebuilt: Iterable[int] = ()) -> None:
    """Fold newly stored live reports (in arrival order) into their trials' stored data, in the
    ingest's transaction. Trials in ``rebuilt`` (rolled back in this transaction) and trials not
    built yet are rebuilt from all their live reports instead (the new ones included)."""
    trial_ids = sorted({r[1] for r in reports} | set(rebuilt))
    if not trial_ids:
        return
    summaries: dict[int, dict[str, Any] | None] = {
        int(trial_id): summary
        for trial_id, summary in session.execute(
            select(Trial.id, Trial.summary_metrics).where(Trial.id.in_(trial_ids))
        )
    }
    whole = set(rebuilt) | {t for t in trial_ids if summaries.get(t) is None}
    rebuild(session, whole)
    fresh = [r for r in reports if r[1] not in whole]
    if not fresh:
        return
    folding = {r[1] for r in fresh}
    starts = {
        (trial_id, group, name): int(points)
        for trial_id, group, name, points in session.execute(
            select(_S.trial_id, _S.group, _S.name, _S.points).where(
                _S.trial_id.in_(sorted(folding))
            )
        )
    }
    parsed = _parse(fresh)
    _store(session, parsed, starts)
    session.execute(
        _SET_SUMMARY,
        [
            {"trial": t, "summary": _summarized(summaries[t] or {}, t, fresh, parsed)}
            for t in sorted(folding)
        ],
    )


def rebuild(session: Session, trial_ids: Iterable[int]) -> None:
    """Recompute the trials' stored data from their live reports (in the caller's
    transaction, which must hold the ingest's serialization: :func:`build_pending`)."""
    ids = sorted(set(trial_ids))
    for chunk in range(0, len(ids), _IDS_PER_QUERY):
        part = ids[chunk : chunk + _IDS_PER_QUERY]
        session.execute(delete(_R).where(_R.trial_id.in_(part)))
        session.execute(delete(_S).where(_S.trial_id.in_(part)))
        summaries: dict[int, dict[str, Any]] = {t: {} for t in part}
        for trial_id, reports in _live_reports(session, part):
            _store(session, _parse(reports), {})
            summaries[trial_id] = fold({}, [(r[2], r[4]) for r in reports])
        session.execute(
            _SET_SUMMARY, [{"trial": t, "summary": summary} for t, summary in summaries.items()]
        )


def _live_reports(session: Session, ids: list[int]) -> Iterator[tuple[int, list[Report]]]:
    """Each trial's live reports in arrival order (trials without any: left out)."""
    m = MetricReport
    rows = session.execute(
        select(m.id, m.trial_id, m.group, m.steps_completed, m.metrics)
        .where(m.trial_id.in_(ids), m.archived.is_(False))
        .order_by(m.trial_id, m.id)
    )
    found: list[Report] = []
    for report_id, trial_id, group, steps, metrics in rows:
        if found and found[0][1] != trial_id:
            yield found[0][1], found
            found = []
        found.append((int(report_id), int(trial_id), group, int(steps), metrics))
    if found:
        yield found[0][1], found


def forget(session: Session, trial_ids: Iterable[int]) -> None:
    """Mark the trials' stored data not built (their reports were written around the ingest,
    as the importer writes them): reads compute it from the reports until the next report or
    :func:`build_pending` builds it."""
    ids = sorted(set(trial_ids))
    for chunk in range(0, len(ids), _IDS_PER_QUERY):
        part = ids[chunk : chunk + _IDS_PER_QUERY]
        session.execute(delete(_R).where(_R.trial_id.in_(part)))
        session.execute(delete(_S).where(_S.trial_id.in_(part)))
        session.execute(
            update(Trial)
            .where(Trial.id.in_(part))
            .values(summary_metrics=null())  # SQL NULL (None would store JSON null)
            .execution_options(synchronize_session=False)
        )


BUILD_BATCH = 20
"""Trials :func:`build_pending` builds in one transaction."""


def build_pending(session: Session, limit: int = BUILD_BATCH) -> int:
    """Build the stored data of up to ``limit`` trials that have none (oldest first), in one
    transaction serialized with the ingest of their reports, and commit; the number built.
    The cluster loop calls it each round until none is left, so a database from before
    migration 0021 (or an import) gets its stored series without a long migration."""
    from stalwart.master.services.metrics import ingest_lock  # metrics imports this module

    pending = list(
        session.scalars(
            select(Trial.id).where(Trial.summary_metrics.is_(None)).order_by(Trial.id).limit(limit)
        )
    )
    session.rollback()  # end the read: the write below starts afresh under the lock
    if not pending:
        return 0
    with ingest_lock(session, pending):
        still = list(
            session.scalars(
                select(Trial.id).where(Trial.id.in_(pending), Trial.summary_metrics.is_(None))
            )
        )
        rebuild(session, still)
        session.commit()
    return len(still)


def _unbuilt(session: Session, ids: Sequence[int]) -> set[int]:
    out: set[int] = set()
    for chunk in range(0, len(ids), _IDS_PER_QUERY):
        out.update(
            session.scalars(
                select(Trial.id).where(
                    Trial.id.in_(ids[chunk : chunk + _IDS_PER_QUERY]),
                    Trial.summary_metrics.is_(None),
                )
            )
        )
    return out


def stored_summaries(session: Session, trial_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Each trial's ``summaryMetrics`` (computed from the reports, not stored, for a trial not
    built yet); trials without reports are absent, as Determined leaves the field out."""
    ids = sorted(set(trial_ids))
    out: dict[int, dict[str, Any]] = {}
    unbuilt: list[int] = []
    for chunk in range(0, len(ids), _IDS_PER_QUERY):
        for trial_id, summary in session.execute(
            select(Trial.id, Trial.summary_metrics).where(
                Trial.id.in_(ids[chunk : chunk + _IDS_PER_QUERY])
            )
        ):
            if summary is None:
                unbuilt.append(int(trial_id))
            elif summary:
                out[int(trial_id)] = summary
    for chunk in range(0, len(unbuilt), _IDS_PER_QUERY):
        for trial_id, reports in _live_reports(session, unbuilt[chunk : chunk + _IDS_PER_QUERY]):
            out[trial_id] = fold({}, [(r[2], r[4]) for r in reports])
    return out


# -- reading -----------------------------------------------------------------------------------


_POINT_COLUMNS = tuple(
    getattr(_R, f"{name}_{part}")
    for name in ("first", "min", "max", "last")
    for part in ("steps", "report", "value")
)
"""What :func:`rolled_series` reads of a bucket: (steps, report, value) of each of its points."""


@dataclass(frozen=True)
class RolledSeries:
    """A long series as its rollups give it: ``total`` values stored, and the first, smallest,
    largest and last value of each bucket at one level, in step order (candidates for LTTB)."""

    total: int
    steps: list[int]
    values: list[float]
    reports: list[int]

    def kept(self, max_points: int) -> list[int]:
        """The indices of at most ``max_points`` of the points, keeping the line's shape."""
        from stalwart.master.services.metrics import lttb_indices  # metrics imports this module

        return lttb_indices([float(x) for x in self.steps], self.values, max_points)


def series_versions(
    session: Session, trial_ids: Sequence[int], group: str, metric: str
) -> dict[int, tuple[int, int]]:
    """``(values, newest report id)`` of each built trial's series (``(0, 0)`` without values;
    trials not built yet are absent: read them from their reports). Changes whenever the series
    does: new values raise the newest id, a rollback rebuilds it from older reports."""
    unbuilt = _unbuilt(session, trial_ids)
    out: dict[int, tuple[int, int]] = {t: (0, 0) for t in trial_ids if t not in unbuilt}
    ids = list(trial_ids)
    for chunk in range(0, len(ids), _IDS_PER_QUERY):
        for trial_id, points, newest in session.execute(
            select(_S.trial_id, _S.points, _S.newest_report).where(
                _S.trial_id.in_(ids[chunk : chunk + _IDS_PER_QUERY]),
                _S.group == group,
                _S.name == metric,
            )
        ):
            out[int(trial_id)] = (int(points), int(newest))
    return out


def level_for(total: int, max_points: int) -> int | None:
    """The level a chart of ``max_points`` reads for a series of ``total`` values: the finest
    with at most ``2 * max_points`` buckets; None when the series is short enough to read whole
    (at most ``8 * max_points`` values)."""
    if total <= FANOUT * max_points:
        return None
    for level in range(1, LEVELS + 1):
        if -(-total // FANOUT**level) <= 2 * max_points:
            return level
    return LEVELS


def rolled_series(
    session: Session,
    versions: Mapping[int, tuple[int, int]],
    group: str,
    metric: str,
    max_points: int,
) -> dict[int, RolledSeries]:
    """The rollups of the trials (``versions`` from :func:`series_versions`) whose series is
    too long to read whole for ``max_points`` (:func:`level_for`); other trials are absent."""
    by_level: dict[int, list[int]] = {}
    for trial_id, (total, _) in versions.items():
        level = level_for(total, max_points)
        if level is not None:
            by_level.setdefault(level, []).append(trial_id)
    out: dict[int, RolledSeries] = {}
    for level, ids in sorted(by_level.items()):
        for chunk in range(0, len(ids), _IDS_PER_QUERY):
            part = sorted(ids[chunk : chunk + _IDS_PER_QUERY])
            points: dict[int, list[tuple[int, int, float]]] = {t: [] for t in part}
            query = (
                select(_R.trial_id, *_POINT_COLUMNS)
                .where(
                    _R.trial_id.in_(part),
                    _R.group == group,
                    _R.name == metric,
                    _R.level == level,
                )
                .order_by(_R.trial_id, _R.bucket)
            )
            for row in session.execute(query):
                found = points[int(row[0])]
                seen: set[int] = set()
                for at in (1, 4, 7, 10):
                    report = int(row[at + 1])
                    if report not in seen:
                        seen.add(report)
                        found.append((int(row[at]), report, float(row[at + 2])))
            for trial_id, found in points.items():
                found.sort()  # by steps, then report id (arrival)
                out[trial_id] = RolledSeries(
                    versions[trial_id][0],
                    [p[0] for p in found],
                    [p[2] for p in found],
                    [p[1] for p in found],
                )
    return out
