"""A trial's ``summaryMetrics``: per metric group, per metric, what Determined keeps.

Determined updates ``runs.summary_metrics`` as each report arrives
(``calculateNewSummaryMetrics``); so does Stalwart's ingest, which keeps the object on the trial
row (:mod:`stalwart.master.services.series_store`), folding the live (non-archived) reports in
arrival order, and rebuilds it from the live reports after a rollback. This module computes it.

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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["fold", "fold_numbers", "group_key", "summarize", "takes_numbers"]

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


def _add(group: dict[str, dict[str, Any]], name: str, value: Any) -> None:
    """Add one value of any type to its metric's entry (a type change resets it)."""
    kind, number = _type_of(value)
    entry = group.get(name)
    if entry is None:
        entry = {"type": kind}
    elif entry["type"] != kind:
        kind = "string"
        entry = {"type": kind}
    group[name] = entry
    if kind != "number":
        return
    if "count" not in entry:
        _set_numbers(entry, [number, number, number, 1])
    else:
        _set_numbers(entry, _numbers(entry, number))


def _numbers(entry: Mapping[str, Any], number: float) -> list[Any]:
    """``[min, max, sum, count]`` of a number entry that has values, with ``number`` added."""
    return [
        _go_min(_as_float(entry["min"]), number),
        _go_max(_as_float(entry["max"]), number),
        _as_float(entry["sum"]) + number,
        int(entry["count"]) + 1,
    ]


def _set_numbers(entry: dict[str, Any], numbers: list[Any]) -> None:
    low, high, total, count = numbers
    entry.update(min=_marked(low), max=_marked(high), sum=_marked(total), count=count)
    entry["mean"] = _marked(total / count)


def fold(
    summary: dict[str, Any], reports: Iterable[tuple[str, Mapping[str, Any] | None]]
) -> dict[str, Any]:
    """``summary`` (changed in place and returned) with ``(group, metrics)`` reports added, in
    the order they were reported: the same result as adding them one by one, with the running
    ``[min, max, sum, count]`` of finite numbers kept as floats between reports (the ingest
    folds batches of a thousand reports; encoding after each one was most of the cost)."""
    running: dict[tuple[str, str], list[Any]] = {}
    latest: dict[str, Mapping[str, Any]] = {}
    for group, metrics in reports:
        key = group_key(group)
        entries = summary.setdefault(key, {})
        values = metrics or {}
        latest[key] = values
        for name, value in values.items():
            kind = type(value)
            if kind is int or (kind is float and value - value == 0):  # finite, not a bool
                entry = entries.get(name)
                if entry is None:
                    entry = entries[name] = {"type": "number"}
                if entry["type"] == "number":
                    number = float(value)
                    found = running.get((key, name))
                    if found is None:
                        start = [number, number, number, 1]
                        running[(key, name)] = (
                            _numbers(entry, number) if "count" in entry else start
                        )
                    else:
                        if number < found[0]:  # a NaN minimum stays NaN, as Go's math.Min
                            found[0] = number
                        if number > found[1]:
                            found[1] = number
                        found[2] += number
                        found[3] += 1
                    continue
            found = running.pop((key, name), None)
            if found is not None:
                _set_numbers(entries[name], found)
            _add(entries, name, value)
    for (key, name), found in running.items():
        _set_numbers(summary[key][name], found)
    for key, values in latest.items():  # each metric of a group: its value in the latest report
        for name, entry in summary[key].items():
            entry["last"] = values.get(name)
    return summary


def takes_numbers(summary: Mapping[str, Any], group: str, names: Iterable[str]) -> bool:
    """Whether every one of the group's metrics ``names`` is new or a number entry (so that
    :func:`fold_numbers` may add plain numbers to them)."""
    entries = summary.get(group_key(group), {})
    return all(entries.get(name, _NUMBER)["type"] == "number" for name in names)


def fold_numbers(
    summary: dict[str, Any],
    group: str,
    numbers: Mapping[str, Sequence[float]],
    latest: Mapping[str, Any],
) -> None:
    """Add one group's reports whose every value is a finite number: ``numbers`` holds each
    metric's values in report order, ``latest`` the group's latest report. The same result as
    :func:`fold` of those reports, at the cost of C's ``min``/``max``/``sum`` per metric rather
    than Python per value (what the ingest does for a batch of plain numbers). Only where
    :func:`takes_numbers` says so."""
    entries = summary.setdefault(group_key(group), {})
    for name, values in numbers.items():
        entry = entries.get(name)
        if entry is None:
            entry = entries[name] = {"type": "number"}
        if "count" in entry:
            low = _go_min(_as_float(entry["min"]), min(values))
            high = _go_max(_as_float(entry["max"]), max(values))
            total = sum(values, _as_float(entry["sum"]))  # added one by one, as fold adds them
            _set_numbers(entry, [low, high, total, int(entry["count"]) + len(values)])
        else:
            total = sum(values[1:], values[0])
            _set_numbers(entry, [min(values), max(values), total, len(values)])
    for name, entry in entries.items():
        entry["last"] = latest.get(name)


_NUMBER = {"type": "number"}


def summarize(reports: Iterable[tuple[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """The summary of ``(group, metrics)`` reports given in the order they were reported."""
    return fold({}, reports)
