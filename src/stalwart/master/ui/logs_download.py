"""UI-only endpoints: a trial's or a task's logs as a plain-text file to download (a Stalwart
extension).

- ``GET /api/v1/ui/trials/{trial_id}/logs/download`` (file ``trial-<id>-logs.txt``)
- ``GET /api/v1/ui/tasks/{task_id}/logs/download`` (file ``task-<id>-logs.txt``)

Contract:

- Same caller and workspace rules as ``GET /api/v1/trials/{trial_id}/logs`` and
  ``GET /api/v1/tasks/{task_id}/logs`` (the policy reads the same path parameter), and the same
  filters with the same names and meaning: ``agentIds``, ``containerIds``, ``rankIds``,
  ``sources``, ``stdtypes``, ``levels``, ``timestampBefore``, ``timestampAfter``,
  ``searchText`` (plus ``allocationIds`` for tasks), ``limit`` and ``orderBy``. There is no
  ``follow``: a download is what is stored when it is asked for.
- ``text/plain; charset=utf-8`` with ``Content-Disposition: attachment``; one line per log
  entry: ``<timestamp> <LEVEL> <rank> <text>``, the timestamp in ISO 8601 UTC with
  microseconds and a ``Z``, the level without ``LOG_LEVEL_`` (``-`` when the line had none),
  the rank as ``rank=N`` (``-`` when none), and the text without its final newline (a newline
  inside it is written ``\\n``, so an entry stays one line). Secrets are masked as the logs API
  masks them.
- Streamed page by page (:func:`stalwart.master.services.logs.stream_logs`): memory does not
  grow with the log. A failure after the first bytes went out ends the file with a line
  ``[download incomplete: ...]``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.logs import (
    LogFilterDep,
    TaskLogFilterDep,
    check_paging,
    require_task,
    task_secrets,
    trial_task_id,
)
from stalwart.master.redact import redact_text
from stalwart.master.services import logs as service
from stalwart.master.state import MasterState

__all__ = ["download_line", "router"]

router = APIRouter(tags=["ui"])

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def download_line(record: service.LogRecord) -> str:
    """One entry as a line of the downloaded file (see the module contract)."""
    stamp = record.timestamp.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    level = record.level or "-"
    rank = f"rank={record.rank_id}" if record.rank_id is not None else "-"
    text = record.log.rstrip("\r\n").replace("\r\n", "\n").replace("\n", "\\n")
    return f"{stamp} {level} {rank} {text}\n"


async def _text(
    records: AsyncGenerator[service.LogRecord, None], secrets: list[str]
) -> AsyncIterator[bytes]:
    async with aclosing(records) as stream:
        try:
            async for record in stream:
                if secrets:
                    record = dataclasses.replace(record, log=redact_text(record.log, secrets))
                yield download_line(record).encode("utf-8")
        except Exception as exc:  # the file has started: say so in it, then end
            yield f"[download incomplete: {exc}]\n".encode()


def _download(
    state: MasterState,
    task_id: str,
    flt: service.LogFilter,
    filename: str,
    *,
    limit: int,
    descending: bool,
) -> StreamingResponse:
    records = service.stream_logs(
        state.sessions,
        state.notifier,
        task_id,
        flt,
        is_terminal=lambda _session: True,
        limit=limit,
        descending=descending,
    )
    return StreamingResponse(
        _text(records, task_secrets(state, task_id)),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f"attachment; filename={filename}"},
    )


@router.get("/ui/trials/{trial_id}/logs/download")
def download_trial_logs(
    trial_id: int,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    flt: LogFilterDep,
    limit: int = 0,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
) -> StreamingResponse:
    """The trial's log lines matching the filters, as ``trial-<id>-logs.txt``."""
    descending = check_paging(limit, False, order_by, False)
    try:
        task_id = trial_task_id(session, trial_id)
    finally:
        session.close()
    return _download(
        state, task_id, flt, f"trial-{trial_id}-logs.txt", limit=limit, descending=descending
    )


@router.get("/ui/tasks/{task_id}/logs/download")
def download_task_logs(
    task_id: str,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    flt: TaskLogFilterDep,
    limit: int = 0,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
) -> StreamingResponse:
    """The task's log lines matching the filters, as ``task-<id>-logs.txt``."""
    descending = check_paging(limit, False, order_by, False)
    try:
        require_task(session, task_id)
    finally:
        session.close()
    name = f"task-{_UNSAFE.sub('_', task_id)}-logs.txt"
    return _download(state, task_id, flt, name, limit=limit, descending=descending)
