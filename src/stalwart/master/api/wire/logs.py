"""Wire forms of log lines, and posted lines in the service's form (models: ``api.models.logs``)."""

from __future__ import annotations

from typing import Any

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.logs import (
    MasterLogEntry,
    MasterLogsResponse,
    TaskLogIn,
    TaskLogsResponse,
    TrialLogsResponse,
    wire_level,
)
from stalwart.master.logring import LogEntry
from stalwart.master.services.logs import LogRecord, NewLog, format_message

__all__ = ["master_log_to_wire", "new_log", "task_log_to_wire", "trial_log_to_wire"]


def new_log(line: TaskLogIn) -> NewLog:
    """The service's form of a posted line."""
    return NewLog(
        task_id=line.task_id,
        log=line.log,
        timestamp=line.timestamp,
        level=line.level,
        allocation_id=line.allocation_id,
        agent_id=line.agent_id,
        container_id=line.container_id,
        rank_id=line.rank_id,
        source=line.source,
        stdtype=line.stdtype,
    )


def master_log_to_wire(entry: LogEntry) -> MasterLogsResponse:
    return MasterLogsResponse(
        log_entry=MasterLogEntry(
            id=entry.id,
            timestamp=wire_time(entry.timestamp) or "",
            level=entry.level,
            message=entry.message,
        )
    )


def _common(record: LogRecord) -> dict[str, Any]:
    return {
        "id": str(record.id),
        "timestamp": wire_time(record.timestamp) or "",
        "level": wire_level(record.level),
        "message": format_message(record),
        "log": record.log,
        "agent_id": record.agent_id,
        "container_id": record.container_id,
        "rank_id": record.rank_id,
        "source": record.source,
        "stdtype": record.stdtype,
    }


def trial_log_to_wire(record: LogRecord, trial_id: int) -> TrialLogsResponse:
    return TrialLogsResponse(trial_id=trial_id, **_common(record))


def task_log_to_wire(record: LogRecord) -> TaskLogsResponse:
    return TaskLogsResponse(
        task_id=record.task_id, allocation_id=record.allocation_id, **_common(record)
    )
