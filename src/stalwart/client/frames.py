"""Metrics as DataFrames: the SDK's reader of the master's columnar export (Arrow IPC).

Contract (:func:`metrics_frame`):

- One row per report of the group and one column per metric, after the fixed columns
  ``trial_id``, ``trial_run_id``, ``steps_completed`` and ``report_time`` (UTC); the column
  types are the master's (``stalwart.master.services.metric_tables``).
- ``library``: ``"pandas"`` (a ``pandas.DataFrame``), ``"polars"`` (a ``polars.DataFrame``)
  or ``"arrow"`` (a ``pyarrow.Table``). pyarrow is needed for all three, and pandas or polars
  for theirs: ``pip install 'stalwart[dataframe]'`` installs pyarrow and pandas. A missing
  one raises :class:`~stalwart.errors.InvalidArgumentError` saying what to install, before
  anything is asked of the master.
- The NDJSON reports (``Trial.metrics``) stay the path for reading report by report.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal

from stalwart.client.session import Session
from stalwart.errors import InvalidArgumentError

__all__ = ["FrameLibrary", "metrics_frame"]

FrameLibrary = Literal["pandas", "polars", "arrow"]

_NEEDS: dict[str, tuple[str, ...]] = {
    "pandas": ("pyarrow", "pandas"),
    "polars": ("pyarrow", "polars"),
    "arrow": ("pyarrow",),
}


def metrics_frame(
    session: Session, path: str, params: Mapping[str, Any], library: FrameLibrary
) -> Any:
    """GET the Arrow IPC stream at ``path`` and return it as ``library``'s frame."""
    modules = _modules(library)
    body = session.content(path, params)
    pyarrow = modules["pyarrow"]
    table = pyarrow.ipc.open_stream(body).read_all()
    if library == "pandas":
        return table.to_pandas()
    if library == "polars":
        return modules["polars"].from_arrow(table)
    return table


def _modules(library: str) -> dict[str, ModuleType]:
    if library not in _NEEDS:
        raise InvalidArgumentError(
            f"unknown DataFrame library {library!r}", hint="use pandas, polars or arrow"
        )
    found: dict[str, ModuleType] = {}
    for name in _NEEDS[library]:
        try:
            found[name] = importlib.import_module(name)
        except ImportError as exc:
            extra = "pip install 'stalwart[dataframe]'"
            if name == "polars":
                extra = "pip install polars pyarrow"
            raise InvalidArgumentError(
                f"metrics as a {library} frame need the {name} package, which is not installed",
                hint=extra,
            ) from exc
    if "pyarrow" in found:
        importlib.import_module("pyarrow.ipc")
    return found
