"""Routes: historical usage (``det resources allocations/raw/aggregated``), admins only.

JSON, under ``/api/v1``:

- ``GET /resources/allocation/raw?timestampAfter=&timestampBefore=``: one entry per allocation
  that held slots in the window;
- ``GET /resources/allocation/aggregated?startDate=&endDate=&period=``: slot-seconds per day or
  month, by user, experiment label, pool (and agent).

CSV, outside ``/api/v1`` as in Determined (:data:`csv_router`; the official CLI prints them):

- ``GET /resources/allocation/allocations-csv?timestamp_after=&timestamp_before=``: one row per
  allocation, with its image pull seconds (columns:
  :data:`stalwart.master.services.usage.CSV_COLUMNS`);
- ``GET /resources/allocation/raw`` and ``/resources/allocation/aggregated``: the JSON routes'
  answers as CSV.

Every parameter is accepted in snake_case and camelCase (the official CLI sends snake_case even
to the JSON routes). Rules: :mod:`stalwart.master.services.usage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from stalwart.master.api.deps import Caller, SessionDep, StateDep, require_admin
from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.usage import (
    AggregatedEntry,
    AggregatedResponse,
    RawEntry,
    RawResponse,
)
from stalwart.master.services import usage as svc

__all__ = ["csv_router", "router"]

router = APIRouter(tags=["usage"])
csv_router = APIRouter(tags=["usage"])

AdminDep = Annotated[Caller, Depends(require_admin)]
_After = Annotated[str | None, Query(alias="timestamp_after")]
_AfterCamel = Annotated[str | None, Query(alias="timestampAfter")]
_Before = Annotated[str | None, Query(alias="timestamp_before")]
_BeforeCamel = Annotated[str | None, Query(alias="timestampBefore")]
_Start = Annotated[str | None, Query(alias="start_date")]
_StartCamel = Annotated[str | None, Query(alias="startDate")]
_End = Annotated[str | None, Query(alias="end_date")]
_EndCamel = Annotated[str | None, Query(alias="endDate")]

_KINDS = {"TRIAL": "experiment"}


@dataclass(frozen=True)
class _Window:
    """A time window's bounds as sent (either spelling), not yet parsed."""

    after: str | None
    before: str | None


def _window(
    after: _After = None,
    before: _Before = None,
    after_camel: _AfterCamel = None,
    before_camel: _BeforeCamel = None,
) -> _Window:
    return _Window(after or after_camel, before or before_camel)


@dataclass(frozen=True)
class _Dates:
    """A date range and period as sent (either spelling), not yet parsed."""

    start: str | None
    end: str | None
    period: str | None


def _dates(
    start: _Start = None,
    end: _End = None,
    start_camel: _StartCamel = None,
    end_camel: _EndCamel = None,
    period: str | None = None,
) -> _Dates:
    return _Dates(start or start_camel, end or end_camel, period)


WindowDep = Annotated[_Window, Depends(_window)]
DatesDep = Annotated[_Dates, Depends(_dates)]


def _rows(session: SessionDep, state: StateDep, window: _Window) -> list[svc.AllocationRow]:
    return svc.allocation_rows(
        session,
        svc.parse_time(window.after, "timestamp_after"),
        svc.parse_time(window.before, "timestamp_before"),
        state.clock.now(),
    )


def _raw(session: SessionDep, state: StateDep, window: _Window) -> RawResponse:
    rows = _rows(session, state, window)
    return RawResponse(
        resource_entries=[
            RawEntry(
                kind=_KINDS.get(r.task_type, r.task_type.lower()),
                username=r.username,
                user_id=r.user_id,
                experiment_id=r.experiment_id,
                labels=list(r.labels),
                slots=r.slots,
                start_time=wire_time(r.start_time) or "",
                end_time=wire_time(r.end_time),
                seconds=r.seconds,
                resource_pool=r.resource_pool,
                allocation_id=r.allocation_id,
                pull_seconds=r.pull_seconds,
            )
            for r in rows
        ]
    )


def _aggregated(session: SessionDep, state: StateDep, dates: _Dates) -> AggregatedResponse:
    usage = svc.aggregate(
        session,
        svc.parse_date(dates.start, "start_date"),
        svc.parse_date(dates.end, "end_date"),
        dates.period or svc.DAILY,
        state.clock.now(),
    )
    return AggregatedResponse(
        resource_entries=[
            AggregatedEntry(
                period_start=u.start.isoformat(),
                period=u.period,
                seconds=u.seconds,
                by_username=u.by_username,
                by_experiment_label=u.by_experiment_label,
                by_resource_pool=u.by_resource_pool,
                by_agent=u.by_agent,
            )
            for u in usage
        ]
    )


@router.get("/resources/allocation/raw", response_model=RawResponse)
def get_raw(
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    window: WindowDep,
) -> RawResponse:
    """Every allocation that held slots in the window (admins)."""
    return _raw(session, state, window)


@router.get("/resources/allocation/aggregated", response_model=AggregatedResponse)
def get_aggregated(
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    dates: DatesDep,
) -> AggregatedResponse:
    """Slot-seconds per day or month (admins)."""
    return _aggregated(session, state, dates)


def _csv(text: str, name: str) -> Response:
    return Response(
        content=text,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
    )


@csv_router.get("/resources/allocation/allocations-csv")
def allocations_csv(
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    window: WindowDep,
) -> Response:
    """One CSV row per allocation that held slots in the window, with its image pull seconds
    (admins)."""
    rows = _rows(session, state, window)
    return _csv(svc.csv_text(svc.CSV_COLUMNS, [r.csv_values() for r in rows]), "allocations")


@csv_router.get("/resources/allocation/raw")
def raw_csv(
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    window: WindowDep,
) -> Response:
    """``/api/v1/resources/allocation/raw`` as CSV (admins)."""
    raw = _raw(session, state, window)
    header = (
        "kind",
        "username",
        "experiment_id",
        "labels",
        "slots",
        "start_time",
        "end_time",
        "seconds",
        "resource_pool",
        "allocation_id",
        "pull_seconds",
    )
    rows = [
        [
            e.kind,
            e.username,
            "" if e.experiment_id is None else str(e.experiment_id),
            ",".join(e.labels),
            str(e.slots),
            e.start_time,
            e.end_time or "",
            f"{e.seconds:.3f}",
            e.resource_pool,
            e.allocation_id,
            "" if e.pull_seconds is None else f"{e.pull_seconds:.3f}",
        ]
        for e in raw.resource_entries
    ]
    return _csv(svc.csv_text(header, rows), "raw")


@csv_router.get("/resources/allocation/aggregated")
def aggregated_csv(
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    dates: DatesDep,
) -> Response:
    """``/api/v1/resources/allocation/aggregated`` as CSV, one row per period and grouping
    (``total``, ``username``, ``experiment_label``, ``resource_pool``, ``agent``) (admins)."""
    agg = _aggregated(session, state, dates)
    rows = []
    for e in agg.resource_entries:
        rows.append([e.period_start, "total", "", f"{e.seconds:.3f}"])
        for kind, values in (
            ("username", e.by_username),
            ("experiment_label", e.by_experiment_label),
            ("resource_pool", e.by_resource_pool),
            ("agent", e.by_agent),
        ):
            rows.extend([e.period_start, kind, k, f"{v:.3f}"] for k, v in sorted(values.items()))
    header = ("period_start", "aggregation_type", "aggregation_key", "seconds")
    return _csv(svc.csv_text(header, rows), "aggregated")
