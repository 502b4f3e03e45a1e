"""Stalwart: an open-source deep-learning training platform.

Importing ``stalwart`` is what training code does (``import stalwart as det``), so this package
and its harness parts must import without the master's dependencies. ``import stalwart`` itself
imports nothing else: ``core``, ``get_cluster_info``, ``ClusterInfo``, ``TrialInfo`` and
``InvalidHP`` are loaded on first use (module ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stalwart import core
    from stalwart.core import ClusterInfo, InvalidHP, TrialInfo, get_cluster_info

__all__ = [
    "LOG_FORMAT",
    "ClusterInfo",
    "InvalidHP",
    "TrialInfo",
    "__version__",
    "core",
    "get_cluster_info",
]

__version__ = "0.1.0"

LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"
"""Determined's log format: ``logging.basicConfig(format=det.LOG_FORMAT)``."""

_FROM_CORE = frozenset({"ClusterInfo", "InvalidHP", "TrialInfo", "get_cluster_info"})


def __getattr__(name: str) -> Any:
    if name == "core":
        return importlib.import_module("stalwart.core")
    if name in _FROM_CORE:
        return getattr(importlib.import_module("stalwart.core"), name)
    raise AttributeError(f"module 'stalwart' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
