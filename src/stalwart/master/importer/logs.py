"""Task logs (``--task-logs``: they can be the largest part of a Determined database).

The logs of the imported trials' tasks (Determined's ``task_logs``), in bulk as metrics are
(:mod:`.bulk`), with a watermark per task (kind ``task_logs``: the highest Determined log id
imported), so a second run brings only new lines and a killed one resumes. Determined keeps
each line as bytes; a line that is not UTF-8 comes over with the undecodable bytes replaced.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, String, Text

from stalwart.master.db.tables import UtcDateTime, utcnow
from stalwart.master.importer.bulk import write_rows
from stalwart.master.importer.context import Context, aware
from stalwart.master.importer.source import Row

__all__ = ["import_task_logs"]

BATCH = 10_000

_COLUMNS = (
    ("task_id", String()),
    ("allocation_id", String()),
    ("agent_id", String()),
    ("container_id", String()),
    ("rank_id", Integer()),
    ("timestamp", UtcDateTime()),
    ("level", String()),
    ("stdtype", String()),
    ("source", String()),
    ("log", Text()),
)


def _values(task_id: str, row: Row) -> tuple[Any, ...]:
    raw = row["log"]
    text = bytes(raw).decode("utf-8", errors="replace") if raw is not None else ""
    return (
        task_id,
        row["allocation_id"],
        row["agent_id"],
        row["container_id"],
        row["rank_id"],
        aware(row["timestamp"]) or utcnow(),
        row["level"],
        row["stdtype"],
        row["source"],
        text,
    )


def import_task_logs(ctx: Context) -> None:
    """The log lines of every imported trial's task that are not here yet."""
    if not ctx.task_logs:
        return
    pending = []
    for old_task, new_task in ctx.ids.items("task"):
        mark = int(ctx.ids.get("task_logs", old_task) or 0)
        count = ctx.source.log_count(old_task, mark)
        present = ctx.source.log_count(old_task, 0) - count
        if present:
            ctx.report.count("task_log", "present", present)
        if count:
            pending.append((old_task, new_task, mark, count))
    total = sum(p[3] for p in pending)
    done = 0
    ctx.progress("task logs", 0, total)
    for old_task, new_task, mark, count in pending:
        if ctx.dry_run:
            ctx.report.count("task_log", "imported", count)
            continue
        for rows in ctx.source.task_logs(old_task, mark, BATCH):
            write_rows(ctx.session, "task_logs", _COLUMNS, [_values(new_task, r) for r in rows])
            ctx.ids.record("task_logs", old_task, rows[-1]["id"])
            ctx.session.commit()
            ctx.report.count("task_log", "imported", len(rows))
            done += len(rows)
            ctx.progress("task logs", done, total)
    ctx.progress("task logs", total, total)
