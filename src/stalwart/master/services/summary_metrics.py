"""A trial's ``summaryMetrics``: per metric group, per metric, what Determined keeps.

Determined updates ``runs.summary_metrics`` as each report arrives
(``calculateNewSummaryMetrics``); Stalwart computes the same object from the stored, live
(non-archived) reports when a trial is read, in the order they were reported (steps, then id),
so a rollback (a restarted run reporting lower steps archives the later reports) needs no
recompute. Reports are never edited in place (a rollback archives them, new ones get new ids),
so a trial's summary is cached in memory under the count and highest id of its live reports:
listing trials again decodes only the reports of trials that reported since.

Contract (the JSON object served as ``trialv1Trial.summaryMetrics``):

- Keys are the groups: ``avg_metrics`` for training, ``validation_metrics`` for validation, the
  group's own name for a custom group.
- Each group maps metric name to ``{"type": ...}`` where type is ``number`` (ints, floats, and
  the strings ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``), ``boolean``, ``string``, ``date``
  (a Python ISO timestamp string), ``object``, ``array`` or ``null``; a metric whose type
  changes between reports becomes ``string`` with its statistics reset.
- Numbers also carry ``min``, ``max``, ``sum``, ``mean`` (floats; non-finite ones as the strings
  above) and ``count`` (an int).
- Every metric of a group carries ``last``: its value in the group's latest report (null when
  that report did not have it).
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.master.db.tables import MetricReport

__all__ = ["group_key", "summarize", "summary_metrics"]

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")


def group_key(group: str) -> str:
    """The key of a metric group in ``summaryMetrics`` (Determined's legacy names)."""
    return {"training": "avg_metrics", "validation": "validation_metrics"}.get(group, group)


def _marked(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _as_float(value: Any) -> float:
    if isinstance(value, str):
        return _SPECIAL.get(value, 0.0)
    return float(value)


def _go_min(a: float, b: float) -> float:
    """Go's ``math.Min``: NaN if either is NaN (Python's ``min`` depends on the order)."""
    return math.nan if math.isnan(a) or math.isnan(b) else min(a, b)


def _go_max(a: float, b: float) -> float:
    """Go's ``math.Max``: NaN if either is NaN."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _type_of(value: Any) -> tuple[str, float]:
    if isinstance(value, bool):
        return "boolean", 0.0
    if isinstance(value, int | float):
        return "number", float(value)
    if isinstance(value, str):
        if value in _SPECIAL:
            return "number", _SPECIAL[value]
        return ("date" if _ISO.match(value) else "string"), 0.0
    if isinstance(value, Mapping):
        return "object", 0.0
    if isinstance(value, list):
        return "array", 0.0
    if value is None:
        return "null", 0.0
    return "string", 0.0


def _add(summary: dict[str, dict[str, Any]], metrics: Mapping[str, Any]) -> None:
    for name, value in metrics.items():
        kind, number = _type_of(value)
        entry = summary.get(name)
        if entry is None:
            entry = {"type": kind}
        elif entry["type"] != kind:
            kind = "string"
            entry = {"type": kind}
        summary[name] = entry
        if kind != "number":
            continue
        if "count" not in entry:
            entry.update(min=_marked(number), max=_marked(number), sum=_marked(number))
            entry.update(mean=_marked(number), count=1)
        else:
            total = _as_float(entry["sum"]) + number
            count = int(entry["count"]) + 1
            entry["min"] = _marked(_go_min(_as_float(entry["min"]), number))
            entry["max"] = _marked(_go_max(_as_float(entry["max"]), number))
            entry["sum"] = _marked(total)
            entry["count"] = count
            entry["mean"] = _marked(total / count)
    for name, entry in summary.items():
        entry["last"] = metrics.get(name)


def summarize(reports: Iterable[tuple[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """The summary of ``(group, metrics)`` reports given in the order they were reported."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for group, metrics in reports:
        _add(out.setdefault(group_key(group), {}), metrics or {})
    return out


CACHE_SIZE = 4096
"""Trials whose summary is kept in memory (least recently used go first)."""

_cache: OrderedDict[int, tuple[tuple[int, int], dict[str, Any]]] = OrderedDict()
_cache_lock = threading.Lock()


def _cached(trial_id: int, key: tuple[int, int]) -> dict[str, Any] | None:
    with _cache_lock:
        found = _cache.get(trial_id)
        if found is None or found[0] != key:
            return None
        _cache.move_to_end(trial_id)
        return found[1]


def _remember(trial_id: int, key: tuple[int, int], summary: dict[str, Any]) -> None:
    with _cache_lock:
        _cache[trial_id] = (key, summary)
        _cache.move_to_end(trial_id)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def summary_metrics(session: Session, trial_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Each trial's summary (see the module contract); trials without reports are absent.
    The returned objects are shared with the cache: callers must not change them."""
    ids = list(trial_ids)
    if not ids:
        return {}
    live = MetricReport.archived.is_(False)
    keys = {
        trial_id: (int(count), int(last))
        for trial_id, count, last in session.execute(
            select(MetricReport.trial_id, func.count(), func.max(MetricReport.id))
            .where(MetricReport.trial_id.in_(ids), live)
            .group_by(MetricReport.trial_id)
        )
    }
    out: dict[int, dict[str, Any]] = {}
    stale = []
    for trial_id, key in keys.items():
        found = _cached(trial_id, key)
        if found is None:
            stale.append(trial_id)
        else:
            out[trial_id] = found
    if not stale:
        return out
    per_trial: dict[int, list[tuple[str, Mapping[str, Any] | None]]] = {}
    rows = session.execute(
        select(MetricReport.trial_id, MetricReport.group, MetricReport.metrics)
        .where(MetricReport.trial_id.in_(stale), live)
        .order_by(MetricReport.trial_id, MetricReport.steps_completed, MetricReport.id)
    )
    for trial_id, group, metrics in rows:
        per_trial.setdefault(trial_id, []).append((group, metrics))
    for trial_id, reports in per_trial.items():
        summary = summarize(reports)
        # the key read first may be older than the rows: cache only under a matching count
        if len(reports) == keys[trial_id][0]:
            _remember(trial_id, keys[trial_id], summary)
        out[trial_id] = summary
    return out
