"""Shared wire conventions (wire doc section 1.3 and 1.5).

- Responses use lowerCamelCase keys; every field declared without a default is REQUIRED by the
  official client and is always emitted. Lists default to ``[]``, never ``null``.
- Requests accept camelCase and snake_case keys, and ``null`` means unset.
- Timestamps are RFC 3339; int64 values the client expects as strings are typed ``Int64Str``.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

__all__ = [
    "Empty",
    "Int64Str",
    "Pagination",
    "WireModel",
    "WireRequest",
    "paginate",
    "wire_time",
]


class WireModel(BaseModel):
    """A response (or nested) object in Determined's JSON dialect."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        ser_json_inf_nan="strings",
    )


class WireRequest(WireModel):
    """A request body: both key spellings, unknown keys ignored (newer clients send more)."""


Int64Str = Annotated[int, PlainSerializer(lambda v: str(v), return_type=str)]
"""An int64 that travels as a decimal string (proto-JSON rule)."""


class Empty(WireModel):
    """The conventional empty 200 response ``{}``."""


class Pagination(WireModel):
    """Pagination block; ``endIndex`` and ``total`` are always present (the client asserts)."""

    offset: int = Field(default=0, description="Requested offset.")
    limit: int = Field(default=0, description="Requested limit (0 = all).")
    start_index: int = Field(default=0, description="Index of the first returned item.")
    end_index: int = Field(default=0, description="Index after the last returned item.")
    total: int = Field(default=0, description="Number of items in all.")


def paginate(total: int, offset: int = 0, limit: int = 0) -> tuple[int, int, Pagination]:
    """``(start, end, pagination)`` for a request; a negative offset counts from the end.

    ``limit`` 0 (or absent) means all remaining items.
    """
    start = max(0, total + offset) if offset < 0 else min(offset, total)
    end = total if limit <= 0 else min(total, start + limit)
    return (
        start,
        end,
        Pagination(offset=offset, limit=limit, start_index=start, end_index=end, total=total),
    )


def wire_time(value: dt.datetime | None) -> str | None:
    """RFC 3339 with a ``Z`` (None stays None; never an empty string)."""
    if value is None:
        return None
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


JsonObject = dict[str, Any]
