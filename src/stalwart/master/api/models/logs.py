"""Wire models of task and trial logs (wire doc 4.4, 5.1).

Posted lines come with snake_case keys (``ship_logs.py``) or camelCase (the bindings); both
are accepted. Streamed lines are ``{"result": <message>}``, one per line:

- ``v1TrialLogsResponse`` REQUIRED: ``id`` (a string), ``trialId``, ``timestamp``, ``level``,
  ``message`` (ends in a newline; the CLI prints it with ``end=""``);
- ``v1TaskLogsResponse`` REQUIRED: ``id``, ``taskId``, ``timestamp``, ``level``, ``message``,
  ``log``;
- ``v1MasterLogsResponse`` REQUIRED: ``logEntry``, a ``v1LogEntry`` whose ``id`` (a number),
  ``level``, ``message`` (no trailing newline: ``det master logs`` prints it with ``print``)
  and ``timestamp`` are all REQUIRED.
"""

from __future__ import annotations

import json

from pydantic import Field

from stalwart.master.api.models.common import WireModel, WireRequest

__all__ = [
    "MasterLogEntry",
    "MasterLogsResponse",
    "PostTaskLogsRequest",
    "TaskLogIn",
    "TaskLogsFieldsResponse",
    "TaskLogsResponse",
    "TrialLogsFieldsResponse",
    "TrialLogsResponse",
    "result_line",
    "stream_error_line",
    "wire_level",
]


class TaskLogIn(WireRequest):
    """``v1TaskLog`` as posted: REQUIRED taskId and log."""

    task_id: str = Field(description="Task the line belongs to.")
    log: str = Field(description="The line (with its newline).")
    timestamp: str | None = Field(default=None, description="When it was written (RFC 3339).")
    level: str | None = Field(default=None, description="LOG_LEVEL_* (or a bare level name).")
    allocation_id: str | None = Field(default=None, description="Allocation.")
    agent_id: str | None = Field(default=None, description="Agent.")
    container_id: str | None = Field(default=None, description="Container.")
    rank_id: int | None = Field(default=None, description="Process rank.")
    source: str | None = Field(default=None, description="Where it came from (task, agent...).")
    stdtype: str | None = Field(default=None, description="stdout or stderr.")
    id: int | None = Field(default=None, description="Ignored (ids are the master's).")


class PostTaskLogsRequest(WireRequest):
    logs: list[TaskLogIn] = Field(default_factory=list, description="The lines.")


class _LogOut(WireModel):
    id: str = Field(description="Line id (a string on the wire).")
    timestamp: str = Field(description="When it was written (RFC 3339).")
    level: str = Field(description="LOG_LEVEL_*; LOG_LEVEL_UNSPECIFIED when the line had none.")
    message: str = Field(description="Determined's flat line, ending in a newline.")
    log: str = Field(description="The raw line.")
    agent_id: str | None = Field(default=None, description="Agent.")
    container_id: str | None = Field(default=None, description="Container.")
    rank_id: int | None = Field(default=None, description="Process rank.")
    source: str | None = Field(default=None, description="Source.")
    stdtype: str | None = Field(default=None, description="stdout or stderr.")


class TrialLogsResponse(_LogOut):
    trial_id: int = Field(description="Trial id.")


class TaskLogsResponse(_LogOut):
    task_id: str = Field(description="Task id.")
    allocation_id: str | None = Field(default=None, description="Allocation.")


class TrialLogsFieldsResponse(WireModel):
    agent_ids: list[str] = Field(default_factory=list, description="Distinct agents.")
    container_ids: list[str] = Field(default_factory=list, description="Distinct containers.")
    rank_ids: list[int] = Field(default_factory=list, description="Distinct ranks.")
    stdtypes: list[str] = Field(default_factory=list, description="Distinct streams.")
    sources: list[str] = Field(default_factory=list, description="Distinct sources.")


class TaskLogsFieldsResponse(TrialLogsFieldsResponse):
    allocation_ids: list[str] = Field(default_factory=list, description="Distinct allocations.")


class MasterLogEntry(WireModel):
    """``v1LogEntry``: one record of the master's own log."""

    id: int = Field(description="Entry id: grows by one per record (a number on the wire).")
    timestamp: str = Field(description="When it was logged (RFC 3339).")
    level: str = Field(description="LOG_LEVEL_*.")
    message: str = Field(description="``<logger>: <message>``, then the traceback if any.")


class MasterLogsResponse(WireModel):
    log_entry: MasterLogEntry = Field(description="The entry.")


def wire_level(level: str | None) -> str:
    """``LOG_LEVEL_<X>`` of a stored level."""
    return f"LOG_LEVEL_{level or 'UNSPECIFIED'}"


def result_line(message: WireModel) -> bytes:
    """One NDJSON line ``{"result": ...}\\n``."""
    return b'{"result":' + message.model_dump_json(by_alias=True).encode() + b"}\n"


def stream_error_line(http: int, grpc: int, message: str) -> bytes:
    """One NDJSON line ``{"error": ...}\\n`` (an error after the stream started)."""
    body = {
        "error": {
            "grpcCode": grpc,
            "httpCode": http,
            "message": message,
            "httpStatus": str(http),
            "details": [],
        }
    }
    return json.dumps(body).encode() + b"\n"
