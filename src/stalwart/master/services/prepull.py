"""The master's pre-pull plan: which images each resource pool should hold, kept fresh.

:func:`queued_experiment_images` reads what the plan needs from the database (the pool and config
of every queued or active experiment); :func:`agent_pool_devices` says which device type each
agent pool's slots are (``cuda`` or ``rocm`` when any of its slots is one, else ``cpu``).
:class:`PrepullPlans` recomputes the plan (:func:`stalwart.environments.prepull.prepull_plan`)
at most every ``refresh_seconds`` and answers, per pool, from memory: agent syncs ask it on every
exchange, so a sync costs no query for it. A pool the last plan did not know (a new agent) is
answered at once by recomputing.

The plan is the same one the Kubernetes resource manager renders as DaemonSets and that
``stalwart envs precache`` reads (``GET /api/v1/prepull``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.config import ExperimentConfig
from stalwart.environments import load_manifest
from stalwart.environments.images import DeviceType
from stalwart.environments.prepull import ExperimentImages, PrepullSettings, prepull_plan
from stalwart.errors import StoredConfigError
from stalwart.master.db.tables import Agent, Experiment, Slot
from stalwart.master.services.experiment_config import typed_config_of

__all__ = [
    "QUEUED_STATES",
    "PrepullPlans",
    "agent_pool_devices",
    "plan_for",
    "queued_experiment_images",
]

log = logging.getLogger(__name__)

QUEUED_STATES = ("ACTIVE", "PAUSED")
"""Experiment states whose images the plan keeps (they run, or may run again)."""

_NEW_POOL_S = 1.0
"""A pool missing from the plan (a new agent's) recomputes it, at most this often."""

_DEVICE_RANK: Mapping[str, int] = {"cpu": 0, "rocm": 1, "cuda": 2}


def queued_experiment_images(session: Session) -> list[ExperimentImages]:
    """The pool and typed config of every queued or active experiment, oldest first.

    The plan is best effort and agent syncs ask for it: an experiment whose stored config no
    longer validates (:class:`~stalwart.errors.StoredConfigError`) is planned from its stored
    JSON instead, and never fails the plan.
    """
    rows = session.execute(
        select(Experiment.id, Experiment.resource_pool, Experiment.config)
        .where(Experiment.state.in_(QUEUED_STATES))
        .order_by(Experiment.id)
    )
    out: list[ExperimentImages] = []
    for experiment_id, pool, config in rows:
        typed: Mapping[str, Any] | ExperimentConfig
        try:
            typed = typed_config_of(experiment_id, config)
        except StoredConfigError as exc:
            log.warning("pre-pull plan: %s", exc)
            typed = config or {}
        out.append(ExperimentImages(pool or "default", typed))
    return out


def agent_pool_devices(session: Session) -> dict[str, DeviceType]:
    """Each agent pool's device type: a pool with any GPU slot pulls its GPU images."""
    found: dict[str, DeviceType] = {}
    rows = session.execute(
        select(Agent.resource_pool, Slot.device_type).join(Slot, Slot.agent_id == Agent.id)
    )
    for pool, device in rows.all():
        kind: DeviceType = "cuda" if device == "cuda" else "rocm" if device == "rocm" else "cpu"
        if _DEVICE_RANK[kind] >= _DEVICE_RANK[found.get(pool, "cpu")]:
            found[pool] = kind
    return found


def plan_for(
    session: Session, pools: Mapping[str, DeviceType], settings: PrepullSettings
) -> dict[str, list[str]]:
    """The plan for ``pools`` (pool -> device type) now; {} when pre-pull is off."""
    if not settings.enabled:
        return {}
    return prepull_plan(
        load_manifest(),
        pools,
        queued_experiment_images(session),
        include_defaults=settings.include_manifest_defaults,
    )


class PrepullPlans:
    """A plan (pool -> images) recomputed by ``compute`` at most every ``refresh_seconds``.

    Thread-safe: syncs ask from the server's worker threads. :meth:`for_agents` builds the one
    the master keeps for its agent pools."""

    def __init__(
        self,
        settings: PrepullSettings,
        compute: Callable[[], dict[str, list[str]]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._compute = compute
        self._clock = clock
        self._lock = threading.Lock()
        self._plan: dict[str, list[str]] = {}
        self._at: float | None = None

    @classmethod
    def for_agents(
        cls,
        settings: PrepullSettings,
        sessions: Callable[[], Any],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> PrepullPlans:
        """The agent pools' plan; ``sessions`` opens a database session, ``clock`` tells the
        time (the master's :class:`~stalwart.master.clock.Clock`)."""

        def compute() -> dict[str, list[str]]:
            with sessions() as session:
                return plan_for(session, agent_pool_devices(session), settings)

        return cls(settings, compute, clock=clock)

    def images(self, pool: str) -> list[str]:
        """The images ``pool`` should hold ([] when pre-pull is off or the pool is unknown)."""
        if not self.settings.enabled:
            return []
        with self._lock:
            now = self._clock()
            age = now - self._at if self._at is not None else None
            stale = age is None or age >= self.settings.refresh_seconds
            if stale or (pool not in self._plan and age is not None and age >= _NEW_POOL_S):
                self._plan = self._compute()
                self._at = now
            return list(self._plan.get(pool, []))
