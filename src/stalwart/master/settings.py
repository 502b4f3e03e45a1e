"""Master settings, read once (a YAML file plus ``STALWART_*`` environment variables).

Precedence: command-line overrides > ``STALWART_*`` environment > the config file > defaults.
Environment variables name top-level settings (``STALWART_PORT``, ``STALWART_DB``,
``STALWART_HOME``, ``STALWART_CLUSTER_NAME``) or nested ones with ``__``
(``STALWART_SECURITY__INITIAL_USER_PASSWORD``). Nothing else in the master reads the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stalwart.config.validation import problems_from_error, render_problems
from stalwart.environments.prepull import PrepullSettings
from stalwart.errors import ConfigError
from stalwart.master.rm.settings import AgentManagerSettings, ResourceManagerSettings

__all__ = [
    "ClusterSettings",
    "Limits",
    "MasterSettings",
    "RetentionPolicySettings",
    "SecuritySettings",
    "WebhookSettings",
    "load_settings",
    "parse_duration",
]

ENV_PREFIX = "STALWART_"


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecuritySettings(_Settings):
    """Authentication settings."""

    initial_user_password: str = Field(
        default="",
        description="Password of the built-in `admin` and `determined` users when they are "
        "first created; empty means no password (Determined's default).",
    )
    min_password_length: int = Field(
        default=8,
        ge=0,
        description="Fewest characters of a password set through the API (creating a user, "
        "changing a password); shorter ones, the empty one included, answer 400. A "
        "client-hashed password's length cannot be seen: only the empty one is refused. Users "
        "that have no password (the built-in ones with the empty initial password) still log "
        "in until one is set. 0 turns the check off.",
    )
    token_lifetime: float = Field(
        default=7 * 24 * 3600,
        gt=0,
        description="Seconds a login token (session) stays valid; afterwards requests with it "
        "answer 401 and the user logs in again.",
    )
    login_max_failures: int = Field(
        default=5,
        ge=1,
        description="Failed logins of one username from one client address before further "
        "attempts answer 429 for `login_lockout` seconds.",
    )
    login_lockout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds over which failed logins are counted, and for which a client that "
        "reached `login_max_failures` is refused.",
    )


class Limits(_Settings):
    """Hard limits that turn oversized requests into clear 4xx errors instead of hangs."""

    max_model_definition_bytes: int = Field(
        default=96 * 1024 * 1024,
        ge=1,
        description="Largest model definition (sum of decoded file contents), as Determined's "
        "client limit (about 95 MiB).",
    )
    max_request_bytes: int = Field(
        default=160 * 1024 * 1024,
        ge=1,
        description="Largest request body of any kind (base64 inflates model definitions by 4/3).",
    )
    max_metrics_report_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1, description="Largest metrics report."
    )
    max_log_batch: int = Field(default=10_000, ge=1, description="Most log lines in one post.")
    max_log_line_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        description="Longest log line stored (UTF-8 bytes); a longer line is stored cut to this "
        "length, with a marker saying how long it was.",
    )


class HttpSettings(_Settings):
    """How the master serves HTTP: TLS, and which reverse proxies it believes."""

    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses (or networks, `10.0.0.0/8`) of reverse proxies in front of the "
        "master whose `X-Forwarded-For` and `X-Forwarded-Proto` headers are believed: the "
        "client address (login lockout, logs) is then the one the proxy reports. Empty (the "
        "default): no proxy header is believed, the address is the connection's.",
    )
    tls_cert: Path | None = Field(
        default=None,
        description="PEM certificate (chain) file: with `tls_key`, the master serves HTTPS "
        "instead of HTTP.",
    )
    tls_key: Path | None = Field(default=None, description="PEM private key file of `tls_cert`.")

    @model_validator(mode="after")
    def _tls_pair(self) -> HttpSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("set both tls_cert and tls_key (or neither)")
        return self


class ClusterSettings(_Settings):
    """How the master runs tasks on its agents."""

    agent_token: str = Field(
        default="",
        description="The enrollment token: the secret a new agent presents "
        "(`X-Stalwart-Agent-Token`) to get a token of its own, which it uses from then on. "
        "Empty: the master generates one at first start and writes it to "
        "`<home>/agent_token`.",
    )
    agent_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds without a sync after which an agent counts as lost: its tasks are "
        "failed and rescheduled elsewhere (a returning agent is told to kill them).",
    )
    preemption_timeout: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a task asked to preempt (pause, cancel, searcher stop, priority "
        "preemption) gets to checkpoint and exit before it is killed.",
    )
    kill_grace: float = Field(
        default=10.0, ge=0, description="Seconds between SIGTERM and SIGKILL when killing a task."
    )
    tick: float = Field(
        default=1.0, gt=0, description="Seconds between scheduling rounds when nothing happens."
    )
    task_port_offset: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="The first port offset this master gives allocations (an allocation with "
        "offset `k` listens on `base + 100 * (k // 5) + k % 5` for each of Determined's port "
        "bases: 12350, 12360, 12365, 29400, and the service port 12370). Masters whose tasks "
        "share hosts need offsets far apart (e.g. 0 and 50), or their tasks' ports collide.",
    )
    queue_successors: bool = Field(
        default=True,
        description="Random and grid searches create their next trials ahead, while the "
        "running ones finish (up to `max_concurrent_trials` more, never running more than "
        "`max_concurrent_trials` at once), and the master queues each behind a running trial "
        "of its experiment on an agent: the agent starts it the moment that trial exits, "
        "without waiting for the master. Only with Stalwart's agents, and only while no other "
        "job waiting in the pool could take the slots. Off: a trial is created when another "
        "exits.",
    )
    prepull: PrepullSettings = Field(
        default_factory=PrepullSettings,
        description="The images each agent pool should hold before trials need them: sent to "
        "agents with every sync; an agent with a container engine pulls what it lacks.",
    )


class WebhookSettings(_Settings):
    """How the master posts webhooks (docs/webhooks.md)."""

    signing_key: str = Field(
        default="",
        description="Key of the `X-Determined-AI-Signature` HMAC. Empty: the master generates "
        "one at first start and writes it to `<home>/webhook_signing_key`.",
    )
    base_url: str = Field(
        default="",
        description="The web UI's address (`https://stalwart.example.com`), for links in Slack "
        "messages; empty: messages carry paths only.",
    )
    attempt_timeout: float = Field(
        default=10.0, gt=0, description="Seconds one delivery attempt may take."
    )
    max_attempts: int = Field(
        default=5, ge=1, description="Attempts per event before it is given up (FAILED)."
    )
    backoff: float = Field(
        default=1.0,
        gt=0,
        description="Seconds before the first retry; each later retry waits twice as long "
        "(at most `max_backoff`).",
    )
    max_backoff: float = Field(default=300.0, gt=0, description="Longest wait between attempts.")
    concurrency: int = Field(
        default=4, ge=1, description="Deliveries in flight at once (a slow receiver holds one)."
    )
    keep_finished: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="Seconds delivered and failed events are kept (`stw webhook deliveries`).",
    )


class RetentionPolicySettings(_Settings):
    """Determined's master ``retention_policy``: how long trials' logs are kept."""

    log_retention_days: int | None = Field(
        default=None,
        ge=-1,
        le=32767,
        description="Days trials' logs are kept after they end, unless an experiment or trial "
        "says otherwise; -1 (or unset) keeps them forever.",
    )
    schedule: str | None = Field(
        default=None,
        description="How often the master deletes expired logs, as a duration (`24h`, `30m`, "
        "`1h30m`, `90s`). Unset: only `det task cleanup-logs` deletes them.",
    )

    @model_validator(mode="after")
    def _check_schedule(self) -> RetentionPolicySettings:
        if self.schedule is not None:
            parse_duration(self.schedule)
        return self

    @property
    def schedule_seconds(self) -> float | None:
        """The schedule in seconds, if one is set."""
        return parse_duration(self.schedule) if self.schedule is not None else None


_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration (``24h``, ``1h30m``, ``90s``, ``500ms``); ValueError
    naming the accepted form otherwise (cron schedules are not supported)."""
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+", text.strip())
    if not parts:
        raise ValueError(
            f"retention_policy.schedule {text!r} is not a duration: give one such as 24h, "
            "30m or 1h30m (cron schedules are not supported by Stalwart)"
        )
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text.strip()):
        total += float(number) * _DURATION_UNITS[unit]
    if total <= 0:
        raise ValueError(f"retention_policy.schedule {text!r} must be longer than zero")
    return total


def _default_home() -> Path:
    return Path("~/.stalwart").expanduser()


class MasterSettings(_Settings):
    """Everything the master is configured with."""

    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=8080, ge=0, le=65535, description="Port to listen on.")
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Processes serving the API, all on one port: more use more cores under "
        "many users. One of them (the leader) runs the cluster loop, searchers and webhooks; "
        "if it dies another takes over within a second. 1 (the default) serves from one "
        "process, which is fastest for a few users.",
    )
    home: Path = Field(default_factory=_default_home, description="State directory.")
    db: str | None = Field(
        default=None,
        description="Database URL: `sqlite:///path` or `postgresql://user@host/db`. Default: "
        "SQLite at `<home>/master.db`.",
    )
    cluster_name: str = Field(default="stalwart", description="Shown by `det master info`.")
    security: SecuritySettings = Field(default_factory=SecuritySettings, description="Auth.")
    limits: Limits = Field(default_factory=Limits, description="Request size limits.")
    http: HttpSettings = Field(
        default_factory=HttpSettings, description="TLS and trusted reverse proxies."
    )
    cluster: ClusterSettings = Field(
        default_factory=ClusterSettings, description="Agents, timeouts and the scheduling loop."
    )
    checkpoint_storage: dict[str, Any] | None = Field(
        default=None,
        description="Checkpoint storage for experiments that set none (Determined's "
        "`checkpoint_storage` master setting). Default: shared_fs under `<home>/checkpoints`.",
    )
    task_container_defaults: dict[str, Any] | None = Field(
        default=None, description="Defaults merged under every experiment's config."
    )
    resource_pools: list[dict[str, Any]] = Field(
        default_factory=list, description="Resource pools (name, task_container_defaults...)."
    )
    webhooks: WebhookSettings = Field(
        default_factory=WebhookSettings, description="Signing, retries and timeouts of webhooks."
    )
    retention_policy: RetentionPolicySettings = Field(
        default_factory=RetentionPolicySettings,
        description="Log retention: `log_retention_days` and the cleanup `schedule`.",
    )
    resource_manager: ResourceManagerSettings = Field(
        default_factory=AgentManagerSettings,
        description="Where tasks run: `{type: agent}` (Stalwart agents, the default), "
        "`{type: slurm, job_storage_root: ..., ...}` (Slurm batch jobs) or "
        "`{type: kubernetes, namespace: ..., ...}` (Kubernetes Jobs, docs/kubernetes.md).",
    )

    @property
    def database_url(self) -> str:
        """The database URL, with the SQLite default under ``home``."""
        if self.db:
            url = self.db
            if url.startswith(("postgresql://", "postgres://")):
                url = "postgresql+psycopg://" + url.split("://", 1)[1]
            return url
        return f"sqlite:///{self.home / 'master.db'}"

    @property
    def default_checkpoint_storage(self) -> dict[str, Any]:
        """The master's checkpoint storage, defaulted."""
        if self.checkpoint_storage:
            return dict(self.checkpoint_storage)
        return {"type": "shared_fs", "host_path": str(self.home / "checkpoints")}

    def startup_hook(self, pool: str) -> str | None:
        """The ``startup_hook`` tasks of resource pool ``pool`` run: the pool's
        ``task_container_defaults`` one, else the master's (Determined merges a pool's defaults
        over the master's field by field); None when neither sets one."""
        for tcd in (self.pool_task_container_defaults(pool), self.task_container_defaults):
            hook = (tcd or {}).get("startup_hook")
            if isinstance(hook, str) and hook.strip():
                return hook
        return None

    def pool_task_container_defaults(self, pool: str) -> dict[str, Any] | None:
        """The ``task_container_defaults`` of resource pool ``pool``, if it sets any."""
        for entry in self.resource_pools:
            if entry.get("pool_name") == pool:
                tcd = entry.get("task_container_defaults")
                return dict(tcd) if isinstance(tcd, Mapping) else None
        return None


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings from ``STALWART_<SETTING>[__<NESTED>...]`` variables. Variables that name no
    master setting (``STALWART_MASTER``, ``STALWART_AGENT_TOKEN``... of the CLI and the agent,
    which often share the master's environment) are not the master's business: ignored."""
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        parts = key[len(ENV_PREFIX) :].lower().split("__")
        if parts[0] not in MasterSettings.model_fields:
            continue
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _deep_update(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            base[key] = _deep_update(dict(base[key]), value)
        else:
            base[key] = value
    return base


def load_settings(
    config_file: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> MasterSettings:
    """Read the settings once; raise ConfigError listing every problem."""
    data: dict[str, Any] = {}
    source = str(config_file) if config_file else "master settings"
    if config_file is not None:
        try:
            loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(source, [f"cannot read the file: {exc.strerror or exc}"]) from exc
        except yaml.YAMLError as exc:
            raise ConfigError(source, [f"not valid YAML: {exc}"]) from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(source, ["<config>: must be a mapping"])
        data = loaded or {}
    _deep_update(data, _from_env(os.environ if environ is None else environ))
    _deep_update(data, {k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return MasterSettings.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_error(exc, MasterSettings, data)
        raise ConfigError(source, render_problems(problems)) from None
