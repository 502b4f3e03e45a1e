"""Historical usage through the SDK (admins): allocations that held slots in a window, as rows
or the master's CSV, and slot-seconds per day or month (rules:
:mod:`stalwart.master.services.usage`)."""

from __future__ import annotations

from stalwart.client.session import Session
from stalwart.master.api.models.usage import (
    AggregatedEntry,
    AggregatedResponse,
    RawEntry,
    RawResponse,
)

__all__ = ["AggregatedEntry", "RawEntry", "aggregated", "allocations_csv", "raw"]

DAILY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY"
MONTHLY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY"


def raw(session: Session, after: str, before: str) -> list[RawEntry]:
    params = {"timestampAfter": after, "timestampBefore": before}
    return session.get("/api/v1/resources/allocation/raw", RawResponse, params).resource_entries


def aggregated(
    session: Session, start_date: str, end_date: str, *, monthly: bool = False
) -> list[AggregatedEntry]:
    params = {
        "startDate": start_date,
        "endDate": end_date,
        "period": MONTHLY if monthly else DAILY,
    }
    path = "/api/v1/resources/allocation/aggregated"
    return session.get(path, AggregatedResponse, params).resource_entries


def allocations_csv(session: Session, after: str, before: str) -> str:
    """The allocations CSV (one row per allocation, with its image pull seconds)."""
    return session.text(
        "/resources/allocation/allocations-csv",
        {"timestamp_after": after, "timestamp_before": before},
    )
