"""The master config's ``resource_manager`` section: which resource manager runs tasks.

``{type: agent}`` (the default) runs them on Stalwart agents; ``{type: slurm, ...}`` and
``{type: pbs, ...}`` submit each allocation as a batch job
(:mod:`stalwart.master.rm.hpc.settings`); ``{type: kubernetes, ...}`` runs it as a Kubernetes Job
(:mod:`stalwart.master.rm.kubernetes.settings`). Pydantic only: :mod:`stalwart.master.settings`
embeds it without importing any resource manager.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from stalwart.master.rm.hpc.settings import PbsSettings, SlurmSettings
from stalwart.master.rm.kubernetes.settings import KubernetesSettings

__all__ = ["MANAGERS", "AgentManagerSettings", "ResourceManagerSettings"]


class AgentManagerSettings(BaseModel):
    """Tasks run on Stalwart agents (``stalwart agent``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["agent"] = "agent"


ResourceManagerSettings = Annotated[
    AgentManagerSettings | SlurmSettings | PbsSettings | KubernetesSettings,
    Field(discriminator="type"),
]
"""The ``resource_manager`` section: agents (default), Slurm, PBS or Kubernetes."""

MANAGERS: dict[str, str] = {
    "agent": "stalwart.master.rm.agent.manager:AgentManager",
    "slurm": "stalwart.master.rm.hpc.manager:SlurmManager",
    "pbs": "stalwart.master.rm.hpc.manager:PbsManager",
    "kubernetes": "stalwart.master.rm.kubernetes.manager:KubernetesManager",
}
"""Each ``resource_manager.type`` and its :class:`~stalwart.master.rm.base.ResourceManager`
class (``module:Class``, imported only when configured: an engine's client library is needed
only by the masters that use it)."""
