"""Building the master's resource manager from its config."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from stalwart.master.rm.base import ResourceManager
from stalwart.master.rm.settings import MANAGERS

if TYPE_CHECKING:
    from stalwart.master.state import MasterState

__all__ = ["build_resource_manager"]


def build_resource_manager(state: MasterState) -> ResourceManager:
    """The :class:`ResourceManager` that ``state.settings.resource_manager`` names
    (:data:`~stalwart.master.rm.settings.MANAGERS`), built once by ``open_state``. Builds
    clients but calls no engine (the first loop round does)."""
    kind = state.settings.resource_manager.type
    module, _, name = MANAGERS[kind].partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, ResourceManager)):
        raise TypeError(f"{MANAGERS[kind]} is not a ResourceManager")
    return cls(state)
