"""Route: ``GET /api/v1/prepull``, the master's pre-pull plan (a Stalwart extension).

The plan (:mod:`stalwart.environments.prepull`) lists, per resource pool, the images its nodes
should hold before trials need them: the manifest's defaults for the pool's slot type (unless
``include_manifest_defaults`` is off) and the images of queued and active experiments. The pools
are the resource manager's: agent pools (by the slots their agents registered), Slurm/PBS
partitions, or Kubernetes pools. ``stalwart envs precache --master`` reads it; agents get their
pool's list in every sync answer; Kubernetes renders it as DaemonSets. Any signed-in user may
read it (image names only, no credentials).
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import WireModel
from stalwart.master.rm.base import Prepull
from stalwart.master.services.prepull import plan_for

__all__ = ["PrepullPlanResponse", "PrepullPool", "router"]

router = APIRouter(tags=["cluster"])


class PrepullPool(WireModel):
    """One pool's part of the plan."""

    slot_type: str = Field(description="cpu, cuda or rocm: whose default images it holds.")
    images: list[str] = Field(description="Images to hold, defaults first; no duplicates.")


class PrepullPlanResponse(WireModel):
    """The whole plan."""

    enabled: bool = Field(description="False: pre-pull is off in the master config.")
    pools: dict[str, PrepullPool] = Field(description="Pool name -> its images.")


@router.get("/prepull", response_model=PrepullPlanResponse)
def get_prepull(_caller: CallerDep, session: SessionDep, state: StateDep) -> PrepullPlanResponse:
    """The pre-pull plan of every pool of this master's resource manager, computed now (an
    engine without pre-pull: disabled, no pools)."""
    if not isinstance(state.rm, Prepull):
        return PrepullPlanResponse(enabled=False, pools={})
    settings = state.rm.prepull_settings
    pools = dict(state.rm.prepull_pools())
    plan = plan_for(session, pools, settings)
    return PrepullPlanResponse(
        enabled=settings.enabled,
        pools={
            name: PrepullPool(slot_type=pools[name], images=images) for name, images in plan.items()
        },
    )
