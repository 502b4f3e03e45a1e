"""Agents as the resource manager: the master decides placement itself and agents carry it out.

Agents report and fetch their work with their own syncs (``POST /agents/{id}/sync``,
:func:`~stalwart.master.cluster.agent_sync.apply_sync`); this manager makes no engine call at
all, so each of its steps is database work under the state lock.

- :meth:`AgentManager.sync` looks for lost agents (at most once a second): an agent silent for
  ``cluster.agent_timeout`` (counted at the earliest from when this master began to listen,
  ``MasterState.serving_since``, so agents can reattach after a master restart however long
  its start took) is disconnected and its unfinished containers exit with no
  code ("lost"); the loop then ends their allocations (the trials restart elsewhere).
- :meth:`AgentManager.schedule` reads a snapshot
  (:func:`~stalwart.master.rm.agent.placement.read_snapshot`), lets the pools' schedulers decide
  (:func:`~stalwart.master.scheduler.schedule`: priority or fair share, gang, fitting), claims
  the assignments in the same step, one transaction for them all
  (:class:`~stalwart.master.rm.agent.placement.Claimer`: a compare-and-set of the slots, then
  the shared claim), queues waiting trials of random and grid searches behind running ones
  of their experiment (:mod:`~stalwart.master.scheduler.successors`, ``Claimer.claim_behind``:
  the agent starts such a successor the moment its predecessor exits), and wakes the agents
  concerned once it has committed; asks the preempted
  allocations to checkpoint and stop (withdrawing their queued successors, which must not take
  the slots); and tells a trial once, in its logs, why it cannot start
  (no agent serves its pool, or the pool is too small).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart import handovers
from stalwart.agent.protocol import DeviceType
from stalwart.environments.prepull import PrepullSettings
from stalwart.master.cluster.lifecycle import TrialExit, master_log
from stalwart.master.db.tables import LIVE_CONTAINER_STATES, Agent, Allocation, Container
from stalwart.master.rm.agent.placement import Claimer, read_snapshot, unschedulable_reason
from stalwart.master.rm.base import Prepull, ResourceManager, ServiceAddresses
from stalwart.master.scheduler import Placement, Snapshot, schedule
from stalwart.master.scheduler.successors import pair_successors
from stalwart.master.services.agents import withdraw_successor
from stalwart.master.services.allocations import request_preemption
from stalwart.master.services.prepull import agent_pool_devices
from stalwart.master.state import MasterState, agent_key
from stalwart.master.transitions import set_container_state

__all__ = ["AgentManager"]

log = logging.getLogger("stalwart.cluster")


class AgentManager(ResourceManager, Prepull, ServiceAddresses):
    """Stalwart's agents as the resource manager (see the module docstring)."""

    name = "agents"
    queues_successors = True

    def __init__(self, state: MasterState) -> None:
        super().__init__(state)
        self._last_reap: float | None = None
        self._explained: set[str] = set()

    # -- sync: lost agents ----------------------------------------------------------------------

    def sync(self) -> list[TrialExit]:
        """Record the containers of lost agents as exited (see the module docstring)."""
        timeout = self.state.settings.cluster.agent_timeout
        now = self.state.clock.monotonic()
        since = self.state.serving_since
        if since is None or now - since < timeout:
            return []  # too early to tell: agents may still be reattaching
        if self._last_reap is not None and now - self._last_reap < min(1.0, timeout / 4):
            return []  # looked a moment ago (a sub-second check is plenty)
        self._last_reap = now
        cutoff = self.state.clock.now().timestamp() - timeout
        with self.step() as session:
            lost = [
                a
                for a in session.scalars(select(Agent).where(Agent.connected.is_(True)))
                if a.last_heartbeat.timestamp() < cutoff
            ]
            for agent in lost:
                agent.connected = False
                reason = f"agent {agent.id} was lost (no sync for {timeout:g}s)"
                for row in session.scalars(
                    select(Container).where(
                        Container.agent_id == agent.id,
                        Container.state.in_(LIVE_CONTAINER_STATES),
                    )
                ):
                    set_container_state(session, row, "EXITED", reason=reason)
                log.warning("agent %s lost: no sync for %gs", agent.id, timeout)
            if lost:
                session.commit()
        return []

    # -- schedule -------------------------------------------------------------------------------

    def schedule(self) -> None:
        """Place what the schedulers decide; preempt; explain waits (see the module
        docstring)."""
        woken: set[str] = set()
        with self.step() as session:
            snapshot = read_snapshot(session, self.state.settings)
            if not any(not r.running for r in snapshot.requests):
                return
            decision = schedule(snapshot)
            claimer = Claimer(
                session,
                cluster_id=self.state.cluster_id,
                first_port_offset=self.state.settings.cluster.task_port_offset,
                startup_hook_of=self.state.settings.startup_hook,
            )
            claims = claimer.claim_all(decision.assignments)
            for waiting, running in pair_successors(snapshot, decision).items():
                queued = claimer.claim_behind(waiting, running)
                if queued is not None:
                    claims.append(queued)
            for claimed in claims:
                woken.update(claimed.agent_ids)
            session.commit()
            handovers.mark("master.claimed", [claimed.allocation_id for claimed in claims])
        for agent_id in sorted(woken):
            self.state.notifier.notify(agent_key(agent_id))
        for allocation_id in decision.preemptions:
            with self.step() as session:
                request_preemption(session, allocation_id)
                # Its queued successor must not take the slots the preemption frees.
                why = "withdrawn before it started: the trial ahead of it was preempted"
                withdrawn = withdraw_successor(session, allocation_id, why)
                if withdrawn is not None and (gone := session.get(Allocation, withdrawn)):
                    master_log(session, gone.task_id, withdrawn, why)
                session.commit()
                self.state.wake(session, [allocation_id, *filter(None, [withdrawn])])
        self._explain_waits(snapshot, decision.assignments)

    def _explain_waits(self, snapshot: Snapshot, started: Mapping[str, Placement]) -> None:
        """Tell a trial, once, why it cannot start: no agent serves its pool, or the pool has
        fewer slots than it needs. (Waiting behind other work needs no explanation.)"""
        for request in snapshot.requests:
            if request.running or request.allocation_id in started:
                continue
            if request.allocation_id in self._explained:
                continue
            why = unschedulable_reason(snapshot, request)
            if why is None:
                continue
            self._explained.add(request.allocation_id)
            with self.step() as session:
                allocation = session.get(Allocation, request.allocation_id)
                if allocation is not None:
                    master_log(session, allocation.task_id, allocation.id, why)
                    session.commit()

    # -- capabilities ---------------------------------------------------------------------------

    @property
    def prepull_settings(self) -> PrepullSettings:
        """``cluster.prepull``: the plan agents receive with every sync."""
        return self.state.settings.cluster.prepull

    def prepull_pools(self) -> dict[str, DeviceType]:
        """Each pool agents serve, with the best device type among its slots."""
        with self.state.sessions() as session:
            return agent_pool_devices(session)

    def service_host(self, session: Session, allocation_id: str, rank: int = 0) -> str | None:
        """The first address the container's agent registered with."""
        row = session.get(Container, (allocation_id, rank))
        agent = session.get(Agent, row.agent_id) if row is not None else None
        if agent is None or not agent.addresses:
            return None
        return str(agent.addresses[0])
