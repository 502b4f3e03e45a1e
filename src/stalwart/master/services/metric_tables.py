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
- The stored JSON text of each report is parsed by Arrow's C++ JSON reader in batches
  (:data:`BATCH` reports); no Python object is built per report unless a batch mixes kinds,
  which then takes the per-report path for the whole table.
- The table is built in memory (about 8 bytes per point plus the batch being parsed); the
  NDJSON stream is the path for reads that must not be held at once.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Trial
from stalwart.master.services import metrics as metrics_svc

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

_TIME = pa.timestamp("us", tz="UTC")
_FIXED_SCHEMA = pa.schema(
    [
        ("trial_id", pa.int64()),
        ("trial_run_id", pa.int64()),
        ("steps_completed", pa.int64()),
        ("report_time", _TIME),
    ]
)
# A stored non-finite marker in value position (after a structural colon or in an array);
# Arrow's JSON reader reads the bare words as IEEE values.
_MARKER = re.compile(rb'([:\[,]\s*)"(NaN|Infinity|-Infinity)"')
_MARKERS = (b'"NaN"', b'Infinity"')
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def experiment_trial_ids(session: Session, experiment_id: int) -> list[int]:
    """The experiment's trial ids, oldest first."""
    query = select(Trial.id).where(Trial.experiment_id == experiment_id).order_by(Trial.id)
    return list(session.scalars(query))


def metrics_table(
    sessions: SessionFactory, trial_ids: Sequence[int], group: str, *, batch: int = BATCH
) -> pa.Table:
    """The trials' reports of ``group`` as one table (see the module contract), read and parsed
    ``batch`` reports at a time."""
    fixed: list[pa.Table] = []
    texts: list[list[str | None]] = []
    for rows in metrics_svc.iter_metrics_text(sessions, trial_ids, group, batch):
        columns, batch_texts = _fixed_columns(rows)
        fixed.append(columns)
        texts.append(batch_texts)
    if not fixed:
        return _FIXED_SCHEMA.empty_table()
    try:
        parsed = [_parse_fast(batch) for batch in texts]
        values = pa.concat_tables(parsed, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        values = _parse_slow([text for batch in texts for text in batch])
    table = pa.concat_tables(fixed)
    for name, column in zip(values.column_names, values.columns, strict=True):
        table = table.append_column(_column_name(name), column)
    return table


def ipc_stream(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream (what ``pyarrow.ipc.open_stream`` reads)."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=BATCH)
    return sink.getvalue()


def _fixed_columns(rows: Sequence[metrics_svc.MetricsTextRow]) -> tuple[pa.Table, list[Any]]:
    """The batch's fixed columns, and its metrics texts."""
    trial_ids, run_ids, steps, times, texts = zip(*rows, strict=True)
    if isinstance(times[0], str):  # SQLite's stored text, UTC
        time_column = pa.array(times, pa.string()).cast(pa.timestamp("us")).cast(_TIME)
    else:  # PostgreSQL: microseconds since the epoch
        time_column = pa.array(times, pa.int64()).cast(_TIME)
    columns: list[pa.Array[Any]] = [
        pa.array(ids, pa.int64()) for ids in (trial_ids, run_ids, steps)
    ]
    columns.append(time_column)
    return pa.Table.from_arrays(columns, schema=_FIXED_SCHEMA), list(texts)


def _parse_fast(texts: Sequence[str | None]) -> pa.Table:
    """One batch's metrics JSON through Arrow's reader (raises ArrowInvalid on mixed kinds)."""
    blob = "\n".join([text or "{}" for text in texts]).encode()
    if any(marker in blob for marker in _MARKERS):
        blob = _MARKER.sub(rb"\1\2", blob)
    options = pa_json.ReadOptions(block_size=max(len(blob) + 1, 1 << 20))
    table = pa_json.read_json(io.BytesIO(blob), read_options=options)
    if table.num_rows != len(texts):  # only empty objects: Arrow reads no columns, no rows
        return _empty_rows(len(texts))
    return table


def _parse_slow(texts: Iterable[str | None]) -> pa.Table:
    """Every report decoded in Python; a column mixing kinds becomes the values' JSON text."""
    rows = [json.loads(text) if text else {} for text in texts]
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    columns = {name: _column([row.get(name) for row in rows]) for name in names}
    return pa.table(columns) if columns else _empty_rows(len(rows))


def _column(values: list[Any]) -> pa.Array[Any]:
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


def _empty_rows(count: int) -> pa.Table:
    return pa.table({"_": pa.nulls(count)}).drop_columns(["_"])


def _column_name(name: str) -> str:
    return f"metrics.{name}" if name in FIXED_COLUMNS else name
