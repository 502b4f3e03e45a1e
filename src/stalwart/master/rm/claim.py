"""Claiming an allocation: the one step every resource manager takes before its engine runs it.

:func:`claim_allocation` writes, in the caller's session, everything a claimed allocation
carries whatever the engine: its ports (``offset`` plus the fixed per-task ports), a fresh
token (only its hash is stored; the token itself travels in the task specs), the engine that
runs it (``allocations.agent_id``: the first container's), one ASSIGNED
:class:`~stalwart.master.db.tables.Container` row per planned container with its
:class:`~stalwart.agent.protocol.TaskSpec` (built by
:func:`~stalwart.master.services.task_spec.allocation_task_specs`), and the allocation ASSIGNED
through :func:`~stalwart.master.transitions.set_allocation_state`. It commits and returns the
token; when the allocation's task cannot be described (not a trial, or gone) it rolls back and
returns None. With ``commit=False`` (several claims in one transaction: agent placement) the
caller commits, and an allocation whose task cannot be described is left as it was: the specs
are built before anything of the claim is written.

What differs per engine is decided before: which slots (agents: a compare-and-set on
``slots``, :mod:`stalwart.master.rm.agent.placement`), how many containers (batch systems:
nodes; Kubernetes: pods), their addresses and the port offset.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from stalwart.agent.protocol import DeviceType
from stalwart.master.db.tables import Allocation, Container
from stalwart.master.services.auth import token_sha256
from stalwart.master.services.task_spec import ContainerPlan, allocation_task_specs, ports_for
from stalwart.master.transitions import set_allocation_state

__all__ = ["StartupHookOf", "claim_allocation"]

StartupHookOf = Callable[[str], str | None]
"""A resource pool's configured startup hook (``MasterSettings.startup_hook``)."""


def claim_allocation(
    session: Session,
    allocation: Allocation,
    plans: Sequence[ContainerPlan],
    *,
    port_offset: int,
    device_type: DeviceType,
    cluster_id: str,
    startup_hook_of: StartupHookOf | None = None,
    commit: bool = True,
    after: str | None = None,
) -> str | None:
    """Claim ``allocation`` (PENDING or WAITING, checked by the caller) for ``plans`` (rank
    order, at least one); the token, or None (see the module docstring). Commits, unless
    ``commit=False``. ``startup_hook_of`` gives the configured startup hook of the allocation's
    resource pool (``MasterSettings.startup_hook``; None: no hook). ``after``: the allocation
    is a queued successor of that running one, on its slots (``after_allocation_id``, and
    ``TaskSpec.after`` in the specs: its agent starts it when that one exits)."""
    if not plans:
        raise ValueError("an allocation runs at least one container")
    ports = ports_for(port_offset)
    token = secrets.token_urlsafe(32)
    specs = allocation_task_specs(
        session,
        allocation,
        plans,
        token=token,
        ports=ports,
        device_type=device_type,
        cluster_id=cluster_id,
        startup_hook=startup_hook_of(allocation.resource_pool) if startup_hook_of else None,
    )
    if specs is None:
        if commit:
            session.rollback()
        return None
    allocation.ports = {"offset": port_offset, **ports}
    allocation.token_sha256 = token_sha256(token)
    allocation.agent_id = plans[0].agent_id
    allocation.after_allocation_id = after
    for plan, spec in zip(plans, specs, strict=True):
        session.add(
            Container(
                allocation_id=allocation.id,
                rank=plan.rank,
                agent_id=plan.agent_id,
                slot_ids=list(plan.slot_ids),
                state="ASSIGNED",
                spec={**spec.model_dump(mode="json"), "after": after},
            )
        )
    set_allocation_state(session, allocation, "ASSIGNED")
    if commit:
        session.commit()
    return token
