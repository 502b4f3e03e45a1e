"""Trial metrics as one Apache Arrow table: the columnar export behind the SDK's DataFrames.

Contract (:func:`metrics_table`):

- One row per live (not archived) report of the group, trial by trial (in the order asked),
  each trial's in step order, as the NDJSON stream sends them.
- Fixed columns first: ``trial_id`` (int64), ``trial_run_id`` (int64), ``steps_completed``
  (int64), ``report_time`` (timestamp, microseconds, UTC); then one column per metric name, in
  the order names first appear. A metric named like a fixed column is renamed
  ``metrics.<name>``.
- A metric's column is int64 when every value is an integer, float64 when every value is a
  number (the stored ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` markers become IEEE NaN and
  infinities), a nested type for objects and lists of one shape, and else (values of mixed
  kinds, e.g. numbers and strings) a string column holding each value's JSON text. A report
  without the metric has a null there.
- The reports are read on the driver's own cursor as plain columns (the time as microseconds
  since the epoch, the metrics as their stored JSON text,
  :func:`~stalwart.master.services.metrics.iter_metrics_text`); the fixed columns go to Arrow
  through C arrays' buffers and the metrics texts, joined into one NDJSON buffer per
  :data:`BATCH` reports, through Arrow's C++ JSON reader: no Python object per value, and no
  ``pyarrow.array`` of Python values (its first use imports pandas where pandas is installed,
  about a second in the master). A batch whose metric mixes kinds makes Arrow refuse it; then
  the whole table is decoded in Python.
- The table is built in memory (about 8 bytes per point plus the batch being parsed); the
  NDJSON stream is the path for reads that must not be held at once. pyarrow is imported on
  first use, not with the master.
"""

from __future__ import annotations

import array
import io
import json
import re
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Trial
from stalwart.master.services import metrics as metrics_svc

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ARROW_STREAM",
    "BATCH",
    "FIXED_COLUMNS",
    "experiment_trial_ids",
    "ipc_stream",
    "metrics_table",
]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
"""The media type of an Arrow IPC stream."""

BATCH = 50_000
"""Reports read and parsed at a time."""

FIXED_COLUMNS = ("trial_id", "trial_run_id", "steps_completed", "report_time")

# A stored non-finite marker in value position (after a structural colon or in an array);
# Arrow's JSON reader reads the bare words as IEEE values.
_MARKER = re.compile(rb'([:\[,]\s*)"(NaN|Infinity|-Infinity)"')
_MARKERS = (b"NaN", b"Infinity")
"""What a batch holding a marker contains (a cheap test before the regular expression: a
pattern ending in a quote would make ``in`` slow on JSON, where quotes are everywhere)."""
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _MixedKindsError(Exception):
    """Arrow refused a batch (a metric of mixed kinds): take the per-report path."""


def experiment_trial_ids(session: Session, experiment_id: int) -> list[int]:
    """The experiment's trial ids, oldest first."""
    query = select(Trial.id).where(Trial.experiment_id == experiment_id).order_by(Trial.id)
    return list(session.scalars(query))


def metrics_table(
    sessions: SessionFactory, trial_ids: Sequence[int], group: str, *, batch: int = BATCH
) -> pa.Table:
    """The trials' reports of ``group`` as one table (see the module contract), read and parsed
    ``batch`` reports at a time."""
    import pyarrow as pa

    batches = list(metrics_svc.iter_metrics_text(sessions, trial_ids, group, batch))
    if not batches:
        return _fixed_schema().empty_table()
    try:
        parsed = [_parse_fast(rows) for rows in batches]
        return pa.concat_tables(parsed, promote_options="permissive")
    except (_MixedKindsError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return _parse_slow([row for rows in batches for row in rows])


def ipc_stream(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream (what ``pyarrow.ipc.open_stream`` reads)."""
    import pyarrow as pa

    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=BATCH)
    return sink.getvalue()


def _fixed_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("trial_id", pa.int64()),
            ("trial_run_id", pa.int64()),
            ("steps_completed", pa.int64()),
            ("report_time", pa.timestamp("us", tz="UTC")),
        ]
    )


def _fixed_columns(rows: Sequence[metrics_svc.MetricsTextRow]) -> list[pa.Array[Any]]:
    """The batch's four fixed columns, from the driver's integers through a C array's buffer
    (what ``pyarrow.array`` of Python values would do, without its first-use import of
    pandas)."""
    import pyarrow as pa

    count = len(rows)
    columns: list[pa.Array[Any]] = []
    for index, field in enumerate(_fixed_schema()):
        values = array.array("q", typing.cast("list[int]", [row[index] for row in rows]))
        column = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(values)])
        columns.append(column if field.type == pa.int64() else column.cast(field.type))
    return columns


def _parse_fast(rows: Sequence[metrics_svc.MetricsTextRow]) -> pa.Table:
    """One batch: the fixed columns, then the metrics through Arrow's JSON reader (raises
    ArrowInvalid, or :class:`_MixedKindsError`, on a metric of mixed kinds)."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    blob = "\n".join([row[4] or "{}" for row in rows]).encode()
    if any(marker in blob for marker in _MARKERS):
        blob = _MARKER.sub(rb"\1\2", blob)
    read = pa_json.ReadOptions(block_size=max(len(blob) + 1, 1 << 20))
    metrics = pa_json.read_json(io.BytesIO(blob), read_options=read)
    if metrics.num_rows != len(rows):
        if metrics.num_columns or metrics.num_rows:  # a stored text with a raw line break
            raise _MixedKindsError
        metrics = pa.table({})  # only empty objects: Arrow reads no rows
    columns = _fixed_columns(rows)
    names = list(FIXED_COLUMNS)
    for name, column in zip(metrics.column_names, metrics.columns, strict=True):
        columns.append(column.combine_chunks())
        names.append(_column_name(name))
    return pa.Table.from_arrays(columns, names=names)


def _parse_slow(rows: Sequence[metrics_svc.MetricsTextRow]) -> pa.Table:
    """Every report decoded in Python; a column mixing kinds becomes the values' JSON text."""
    import pyarrow as pa

    reports = [json.loads(row[4]) if row[4] else {} for row in rows]
    names: dict[str, None] = {}
    for report in reports:
        names.update(dict.fromkeys(report))
    fixed = dict(zip(FIXED_COLUMNS, _fixed_columns(rows), strict=True))
    metric_columns = {_column_name(n): _column([r.get(n) for r in reports]) for n in names}
    return pa.table({**fixed, **metric_columns})


def _column(values: list[Any]) -> pa.Array[Any]:
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if all(_is_number(v) or (isinstance(v, str) and v in _SPECIAL) for v in present):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            return pa.array(values, pa.int64())
        return pa.array(
            [_SPECIAL.get(v, v) if isinstance(v, str) else v for v in values], pa.float64()
        )
    try:
        inferred: pa.Array[Any] = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())
    return inferred


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _column_name(name: str) -> str:
    return f"metrics.{name}" if name in FIXED_COLUMNS else name
