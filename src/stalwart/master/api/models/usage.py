"""Wire models of historical usage: ``v1ResourceAllocationRawEntry``,
``v1ResourceAllocationRawResponse``, ``v1ResourceAllocationAggregatedEntry``,
``v1ResourceAllocationAggregatedResponse``.

REQUIRED keys the official client reads: an aggregated entry's byExperimentLabel,
byResourcePool, byUsername, period, periodStart, seconds; the aggregated response's
resourceEntries.
"""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import WireModel

__all__ = [
    "AggregatedEntry",
    "AggregatedResponse",
    "RawEntry",
    "RawResponse",
]


class RawEntry(WireModel):
    """``v1ResourceAllocationRawEntry``: one allocation that held slots in the window."""

    kind: str = Field(description="What ran: experiment, command, notebook, shell...")
    username: str = Field(description="Whose it was.")
    user_id: int | None = Field(default=None, description="Their user id.")
    experiment_id: int | None = Field(default=None, description="Its experiment, if any.")
    labels: list[str] = Field(default_factory=list, description="Its experiment's labels.")
    slots: int = Field(description="Slots it held.")
    start_time: str = Field(description="When it got its slots (RFC 3339).")
    end_time: str | None = Field(default=None, description="When it ended (still running: none).")
    seconds: float = Field(description="Seconds it held them within the window.")
    resource_pool: str = Field(description="Stalwart extension: its pool.")
    allocation_id: str = Field(description="Stalwart extension: the allocation.")
    pull_seconds: float | None = Field(
        default=None, description="Stalwart extension: seconds its image took to pull."
    )


class RawResponse(WireModel):
    """``v1ResourceAllocationRawResponse``."""

    resource_entries: list[RawEntry] = Field(default_factory=list, description="The entries.")


class AggregatedEntry(WireModel):
    """``v1ResourceAllocationAggregatedEntry``: slot-seconds of one day or month."""

    period_start: str = Field(description="The period's first day (YYYY-MM-DD).")
    period: str = Field(description="v1ResourceAllocationAggregationPeriod.")
    seconds: float = Field(description="Slot-seconds in all.")
    by_username: dict[str, float] = Field(default_factory=dict, description="By user.")
    by_experiment_label: dict[str, float] = Field(
        default_factory=dict, description="By experiment label."
    )
    by_resource_pool: dict[str, float] = Field(default_factory=dict, description="By pool.")
    by_agent: dict[str, float] = Field(
        default_factory=dict, description="Stalwart extension: by agent."
    )


class AggregatedResponse(WireModel):
    """``v1ResourceAllocationAggregatedResponse``."""

    resource_entries: list[AggregatedEntry] = Field(
        default_factory=list, description="One entry per period."
    )
