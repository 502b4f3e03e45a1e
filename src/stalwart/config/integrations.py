"""The ``integrations`` section: links from an experiment to Pachyderm and to webhooks.

Contract: the shapes are Determined 0.38's (``integrations.json`` and what it references).
Determined only records the Pachyderm fields (the web UI links the experiment to its dataset);
Stalwart records them too and does nothing else with them. ``webhooks`` picks which of the
cluster's webhooks fire for this experiment.
"""

from __future__ import annotations

from pydantic import Field

from stalwart.config.base import ConfigModel

__all__ = [
    "IntegrationsConfig",
    "PachydermConfig",
    "PachydermDataset",
    "PachydermPachd",
    "PachydermProxy",
    "WebhooksConfig",
]


class PachydermPachd(ConfigModel):
    """Address of the Pachyderm daemon (``pachd``)."""

    host: str = Field(default="", description="pachd host name.")
    port: int | None = Field(default=None, description="pachd port.")
    token: str = Field(default="", description="Pachyderm auth token, if pachd needs one.")


class PachydermProxy(ConfigModel):
    """Address of the Pachyderm console proxy, for links from the web UI."""

    scheme: str = Field(default="", description="`http` or `https`.")
    host: str = Field(default="", description="Proxy host name.")
    port: int | None = Field(default=None, description="Proxy port.")


class PachydermDataset(ConfigModel):
    """The Pachyderm data the experiment trains on."""

    project: str = Field(description="Pachyderm project.")
    repo: str = Field(description="Pachyderm repository.")
    commit: str | None = Field(default=None, description="Commit ID.")
    branch: str | None = Field(default=None, description="Branch name.")
    token: str | None = Field(default=None, description="Auth token for the dataset.")


class PachydermConfig(ConfigModel):
    """Where the experiment's data comes from in Pachyderm. Recorded, not acted on."""

    pachd: PachydermPachd = Field(description="The Pachyderm daemon.")
    proxy: PachydermProxy = Field(description="The Pachyderm console proxy.")
    dataset: PachydermDataset = Field(description="The dataset.")


class WebhooksConfig(ConfigModel):
    """Which of the cluster's webhooks fire for this experiment."""

    webhook_id: list[int] | None = Field(
        default=None, description="IDs of webhooks (with the `specific` mode) to fire."
    )
    webhook_name: list[str] | None = Field(
        default=None, description="Names of webhooks (with the `specific` mode) to fire."
    )
    exclude: bool = Field(
        default=False, description="Fire no cluster-wide webhooks for this experiment."
    )


class IntegrationsConfig(ConfigModel):
    """Integrations of the experiment with other systems."""

    pachyderm: PachydermConfig | None = Field(
        default=None, description="The Pachyderm dataset the experiment trains on (recorded only)."
    )
    webhooks: WebhooksConfig | None = Field(
        default=None, description="Which webhooks fire for this experiment."
    )
