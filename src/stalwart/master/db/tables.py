"""The master's tables (SQLAlchemy 2.0, typed ``Mapped[...]`` columns).

Conventions: state columns hold Determined's enum names without the ``STATE_`` prefix
(``ACTIVE``, ``COMPLETED``...) and change only through :mod:`stalwart.master.transitions`;
times are timezone-aware UTC; JSON columns hold plain JSON values. Schema changes need an Alembic
migration in ``stalwart/master/db/migrations/versions`` (``tests/master/test_migrations.py``
fails when the tables and the migrations disagree).

Ids are never reused: every integer id is ``AUTOINCREMENT`` on SQLite (:data:`NEVER_REUSE_IDS` in
``__table_args__``; without it SQLite hands out the highest freed id again, so a deleted
experiment's id would name the next one). PostgreSQL's identities never go back.
``tests/master/test_ids.py`` checks that every table with an integer id has it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

__all__ = [
    "LIVE_CONTAINER_STATES",
    "NEVER_REUSE_IDS",
    "AccessToken",
    "Agent",
    "AgentCredential",
    "Allocation",
    "Base",
    "Checkpoint",
    "Container",
    "Experiment",
    "ImportMapping",
    "LoginFailure",
    "MasterMeta",
    "MetricReport",
    "MetricRollup",
    "MetricSeries",
    "Model",
    "ModelVersion",
    "PoolBinding",
    "Project",
    "Slot",
    "StorageBackend",
    "Task",
    "TaskLog",
    "Template",
    "Trial",
    "TrialMetricSummary",
    "TrialSourceInfo",
    "User",
    "UserGroup",
    "UserGroupMember",
    "UserSession",
    "UserWebSetting",
    "Webhook",
    "WebhookDelivery",
    "WebhookLogMatch",
    "WebhookTrigger",
    "Workspace",
    "WorkspaceGroupRole",
    "WorkspacePin",
    "WorkspaceRole",
    "utcnow",
]

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite needs INTEGER PRIMARY KEY for autoincrement; PostgreSQL gets a BIGINT identity.
BigId = BigInteger().with_variant(Integer(), "sqlite")

NEVER_REUSE_IDS: dict[str, Any] = {"sqlite_autoincrement": True}
"""Table options of every table with an integer id: SQLite's ``AUTOINCREMENT`` (ids of deleted
rows are never handed out again; the highest id given so far is kept in ``sqlite_sequence``)."""


def utcnow() -> dt.datetime:
    """Now, timezone-aware UTC (what every time column stores)."""
    return dt.datetime.now(dt.UTC)


class UtcDateTime(TypeDecorator[dt.datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite drops the zone; we restore it)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use stalwart.master.db.tables.utcnow")
        return value.astimezone(dt.UTC)

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so migrations name constraints stably."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        dt.datetime: UtcDateTime(),
    }


class MasterMeta(Base):
    """Facts about this cluster that outlive a master process (e.g. ``cluster_id``)."""

    __tablename__ = "master_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class User(Base):
    """A person (or the built-in ``admin`` / ``determined``) who can log in."""

    __tablename__ = "users"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(255), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(255))
    password_hash: Mapped[str | None] = mapped_column(String(255))
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    remote: Mapped[bool] = mapped_column(Boolean, default=False)
    modified_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_auth_at: Mapped[dt.datetime | None] = mapped_column()
    agent_uid: Mapped[int | None] = mapped_column(Integer)
    agent_gid: Mapped[int | None] = mapped_column(Integer)
    agent_user: Mapped[str | None] = mapped_column(String(255))
    agent_group: Mapped[str | None] = mapped_column(String(255))


class UserWebSetting(Base):
    """One setting of a user's web UI (Determined's ``user_web_settings``: the UI's table
    columns, filters, pinned items...), as opaque text under a key and a storage path."""

    __tablename__ = "user_web_settings"
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    storage_path: Mapped[str] = mapped_column(String(255), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class UserSession(Base):
    """A login session; only the SHA-256 of its token is stored."""

    __tablename__ = "user_sessions"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column()


class Workspace(Base):
    """A workspace; workspace 1 "Uncategorized" always exists."""

    __tablename__ = "workspaces"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    default_role: Mapped[str | None] = mapped_column(String(16))
    """The role of users without an assignment here (:mod:`stalwart.master.policy`); None is
    ``member``."""
    agent_uid: Mapped[int | None] = mapped_column(Integer)
    """The OS identity tasks of this workspace run as on agents (uid, gid, user, group); when
    any is set it wins over the owner's link (``det user link-with-agent-user``)."""
    agent_gid: Mapped[int | None] = mapped_column(Integer)
    agent_user: Mapped[str | None] = mapped_column(String(255))
    agent_group: Mapped[str | None] = mapped_column(String(255))
    checkpoint_storage: Mapped[dict[str, Any] | None] = mapped_column()
    """Checkpoint storage of the workspace's experiments: merged under each experiment's own
    ``checkpoint_storage`` and over the master's default (None: the master's)."""
    default_compute_pool: Mapped[str | None] = mapped_column(String(255))
    """The pool of the workspace's experiments and tasks with slots that name none."""
    default_aux_pool: Mapped[str | None] = mapped_column(String(255))
    """The pool of the workspace's zero-slot tasks that name none."""


class WorkspaceRole(Base):
    """A user's role in a workspace (``viewer``, ``member``, ``editor`` or ``admin``)."""

    __tablename__ = "workspace_roles"
    __table_args__ = (UniqueConstraint("workspace_id", "user_id"), NEVER_REUSE_IDS)
    id: Mapped[int] = mapped_column(primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))


class Project(Base):
    """A project in a workspace; project 1 "Uncategorized" always exists."""

    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("workspace_id", "name"), NEVER_REUSE_IDS)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), index=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    key: Mapped[str | None] = mapped_column(String(5), unique=True)
    """Its short unique key (1-5 upper-case letters and digits; made from the name when not
    given)."""
    notes: Mapped[list[Any]] = mapped_column(server_default=text("'[]'"))
    """Its notes: ``[{"name": ..., "contents": ...}]`` in order (the database fills ``[]``)."""
    created_at: Mapped[dt.datetime | None] = mapped_column()


class Experiment(Base):
    """An experiment: its original YAML, its fully defaulted config and its model definition.

    The model definition and the searcher state are large (megabytes; one entry per trial) and
    load only when read (deferred columns).
    """

    __tablename__ = "experiments"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    labels: Mapped[list[Any]] = mapped_column(default=list)
    state: Mapped[str] = mapped_column(String(32), index=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    original_config: Mapped[str] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column()
    model_definition: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    searcher_type: Mapped[str] = mapped_column(String(32))
    resource_pool: Mapped[str] = mapped_column(String(255), default="default")
    job_id: Mapped[str] = mapped_column(String(64), unique=True)
    parent_id: Mapped[int | None] = mapped_column(Integer)
    progress: Mapped[float | None] = mapped_column(Float)
    start_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    end_time: Mapped[dt.datetime | None] = mapped_column()
    searcher_state: Mapped[dict[str, Any] | None] = mapped_column(deferred=True)
    checkpoints_collected: Mapped[bool] = mapped_column(Boolean, default=False)
    # Unmanaged: reported from outside the cluster (the SDK's detached mode); the master creates
    # no trial and runs nothing for it. Its external id (unique) finds it again.
    unmanaged: Mapped[bool] = mapped_column(Boolean, server_default=false())
    external_experiment_id: Mapped[str | None] = mapped_column(String(255), index=True, unique=True)
    notes: Mapped[str] = mapped_column(Text, server_default="")
    """Free-text notes (``v1Experiment.notes``); set by ``stalwart import determined`` from
    Determined's, with a line saying why an experiment that was running is paused."""
    best_trial_id: Mapped[int | None] = mapped_column(Integer)
    """Its trial with the best searcher metric value (ties: the lowest id); null before any.
    Kept by :func:`stalwart.master.services.metrics.refresh_experiment_best`, in the
    transaction that changes a trial's ``searcher_metric_value``."""
    best_searcher_metric: Mapped[float | None] = mapped_column(Float)
    """That trial's searcher metric value (what the experiment list sorts and shows)."""


class Trial(Base):
    """A trial: one hyperparameter configuration of an experiment, across its runs."""

    __tablename__ = "trials"
    __table_args__ = (
        # What is read of an experiment of any size on every trial's exit or validation: its
        # live trials, the few whose exit its searcher has not been fed, its best trial
        # (migration 0022).
        Index("ix_trials_experiment_state", "experiment_id", "state"),
        Index("ix_trials_experiment_metric", "experiment_id", "searcher_metric_value"),
        Index(
            "ix_trials_searcher_exit",
            "experiment_id",
            sqlite_where=text("searcher_exit IS NOT NULL"),
            postgresql_where=text("searcher_exit IS NOT NULL"),
        ),
        NEVER_REUSE_IDS,
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), index=True
    )
    request_id: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str] = mapped_column(String(128), unique=True)
    state: Mapped[str] = mapped_column(String(32), index=True)
    hparams: Mapped[dict[str, Any]] = mapped_column()
    seed: Mapped[int] = mapped_column(BigInteger, default=0)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    run_id: Mapped[int] = mapped_column(Integer, default=0)
    start_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    end_time: Mapped[dt.datetime | None] = mapped_column()
    total_batches: Mapped[int] = mapped_column(BigInteger, default=0)
    runner_state: Mapped[str] = mapped_column(String(255), default="")
    progress: Mapped[float | None] = mapped_column(Float)
    searcher_metric_value: Mapped[float | None] = mapped_column(Float)
    latest_checkpoint: Mapped[str | None] = mapped_column(String(64))
    warm_start_checkpoint: Mapped[str | None] = mapped_column(String(64))
    """The checkpoint the trial started from (``searcher.source_checkpoint_uuid`` or the latest
    of ``searcher.source_trial_id``), fixed at creation; its first run restores it."""
    early_exit_reason: Mapped[str | None] = mapped_column(String(64))
    run_metadata: Mapped[dict[str, Any] | None] = mapped_column()
    searcher_stopped: Mapped[bool] = mapped_column(Boolean, default=False)
    searcher_exit: Mapped[str | None] = mapped_column(String(32))
    """The trial's exit, not yet fed to its searcher: ``EXITED`` or an ``ExitedReason``. Set
    in the transaction that ends the trial, cleared in the one that feeds the searcher
    (:mod:`stalwart.master.cluster.search`), so a master killed in between loses nothing."""
    summary_metrics: Mapped[dict[str, Any] | None] = mapped_column()
    """Determined's ``summaryMetrics`` of the live reports, kept by the ingest with the trial's
    stored series (:mod:`stalwart.master.services.series_store`); NULL: not built yet (trials
    older than migration 0021, imported metrics), built on the next read or report."""


class TrialSourceInfo(Base):
    """A checkpoint (and model version) a trial used (``POST /api/v1/trial-source-info``):
    an inference or fine-tuning run records what it started from."""

    __tablename__ = "trial_source_infos"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True
    )
    checkpoint_uuid: Mapped[str] = mapped_column(
        ForeignKey("checkpoints.uuid", ondelete="CASCADE"), primary_key=True, index=True
    )
    source_type: Mapped[str] = mapped_column(String(64))
    """``TRIAL_SOURCE_INFO_TYPE_INFERENCE`` / ``_FINE_TUNING`` / ``_UNSPECIFIED``."""
    model_id: Mapped[int | None] = mapped_column(Integer)
    model_version: Mapped[int | None] = mapped_column(Integer)


class Task(Base):
    """A task (a trial's task, or a generic one); allocations are its runs."""

    __tablename__ = "tasks"
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    task_type: Mapped[str] = mapped_column(String(32))
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    experiment_id: Mapped[int | None] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), index=True
    )
    trial_id: Mapped[int | None] = mapped_column(Integer, index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    start_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    end_time: Mapped[dt.datetime | None] = mapped_column()
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="SET NULL"), index=True
    )
    """The workspace of an interactive task (commands, notebooks, shells, TensorBoards,
    generic tasks); None for a trial's task (its experiment's project says)."""
    config: Mapped[dict[str, Any] | None] = mapped_column()
    """An interactive task's fully defaulted command config (``det cmd config``)."""
    context: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    """An interactive task's uploaded files (``-c`` / ``-i``) as ``.tar.gz``."""
    secrets: Mapped[dict[str, Any] | None] = mapped_column(deferred=True)
    """An interactive task's own secrets: the notebook token, the shell's key pair. Served only
    to the task's owner (or an admin) and to the task's own containers."""
    extra: Mapped[dict[str, Any] | None] = mapped_column()
    """What an interactive task was made from: a TensorBoard's experiment and trial ids, a
    generic task's parent and fork. A trial's task: what its log policies matched
    (:mod:`stalwart.master.services.log_policies`)."""


class Allocation(Base):
    """One run of a task on a set of slots; its token authenticates the task's calls."""

    __tablename__ = "allocations"
    id: Mapped[str] = mapped_column(String(160), primary_key=True)
    task_id: Mapped[str] = mapped_column(
        ForeignKey("tasks.task_id", ondelete="CASCADE"), index=True
    )
    state: Mapped[str] = mapped_column(String(32), index=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    slots: Mapped[int] = mapped_column(Integer, default=0)
    resource_pool: Mapped[str] = mapped_column(String(255), default="default")
    agent_id: Mapped[str | None] = mapped_column(String(255))
    ports: Mapped[dict[str, Any] | None] = mapped_column()
    start_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    end_time: Mapped[dt.datetime | None] = mapped_column()
    exit_code: Mapped[int | None] = mapped_column(Integer)
    exit_reason: Mapped[str | None] = mapped_column(Text)
    preempt_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    preempt_acked: Mapped[bool] = mapped_column(Boolean, default=False)
    accelerator_data: Mapped[dict[str, Any] | None] = mapped_column()
    batch_job_id: Mapped[str | None] = mapped_column(String(64))
    """The batch system's job id (Slurm) once submitted; None on agents."""
    is_ready: Mapped[bool] = mapped_column(Boolean, default=False)
    """The task's service answers (``POST /allocations/{id}/ready``); trials: once RUNNING."""
    last_activity: Mapped[dt.datetime | None] = mapped_column()
    """When a user last used the task's service (proxied request, a notebook reporting it is
    not idle); an interactive task idle past its ``idle_timeout`` is killed."""
    idle: Mapped[bool | None] = mapped_column(Boolean)
    """A notebook's last idle report (None: none yet)."""
    pull_seconds: Mapped[float | None] = mapped_column(Float)
    """Seconds spent pulling the task's image before it started, the longest over its
    containers (None: nothing was pulled, or not known yet). Written only through
    :func:`stalwart.master.services.allocations.record_pull_time`."""
    after_allocation_id: Mapped[str | None] = mapped_column(String(160), index=True)
    """Queued behind this running allocation (a queued successor): placed on its slots, which
    stay that allocation's until it ends; its agent starts this one the moment the other
    exits. Cleared when the slots pass to it (:func:`stalwart.master.services.agents.
    pass_slots_on`). None for every other allocation."""


LIVE_CONTAINER_STATES = ("ASSIGNED", "STARTING", "RUNNING")
"""Container states before EXITED."""


class Container(Base):
    """One container (process group) of an allocation on one agent.

    ``state``: ASSIGNED (placed, not yet reported by its agent), STARTING, RUNNING, EXITED.
    Live containers of an agent are found through ``(agent_id, state)``: query with
    ``state.in_(LIVE_CONTAINER_STATES)`` so the cost does not grow with the agent's history.
    ``spec`` is the agent's :class:`~stalwart.agent.protocol.TaskSpec` (with the allocation
    token), fixed when the allocation is placed so that every rank gets the same token.
    """

    __tablename__ = "containers"
    __table_args__ = (Index("ix_containers_agent_state", "agent_id", "state"),)
    allocation_id: Mapped[str] = mapped_column(
        ForeignKey("allocations.id", ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    agent_id: Mapped[str] = mapped_column(String(255))
    slot_ids: Mapped[list[Any]] = mapped_column(default=list)
    state: Mapped[str] = mapped_column(String(16))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    exit_reason: Mapped[str | None] = mapped_column(Text)
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict, deferred=True)
    assigned_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    exited_at: Mapped[dt.datetime | None] = mapped_column()


class MetricReport(Base):
    """One metrics report of a trial (training, validation or a custom group)."""

    __tablename__ = "metric_reports"
    __table_args__ = (
        Index("ix_metric_reports_series", "trial_id", "group", "steps_completed"),
        NEVER_REUSE_IDS,
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    trial_run_id: Mapped[int] = mapped_column(Integer, default=0)
    group: Mapped[str] = mapped_column(String(64))
    steps_completed: Mapped[int] = mapped_column(BigInteger)
    report_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    metrics: Mapped[dict[str, Any]] = mapped_column()
    batch_metrics: Mapped[list[Any] | None] = mapped_column()
    archived: Mapped[bool] = mapped_column(Boolean, default=False)


class TrialMetricSummary(Base):
    """The running summary of one numeric validation metric of a trial over its live reports
    (what the experiment list sorts and filters by without reading the reports' JSON).

    Kept by :mod:`stalwart.master.services.metric_summaries` in the ingest transaction; only
    finite numbers count. ``last`` is the value in the latest report (by steps, then arrival)
    that had the metric.
    """

    __tablename__ = "trial_metric_summaries"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True
    )
    group: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    min: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    sum: Mapped[float] = mapped_column(Float)
    count: Mapped[int] = mapped_column(Integer)
    last: Mapped[float] = mapped_column(Float)
    last_steps: Mapped[int] = mapped_column(BigInteger)


class MetricSeries(Base):
    """One stored series: a top-level metric of a group of a trial, with how many finite values
    it has and the newest report among them (:mod:`stalwart.master.services.series_store`)."""

    __tablename__ = "metric_series"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True
    )
    group: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    points: Mapped[int] = mapped_column(BigInteger)
    newest_report: Mapped[int] = mapped_column(BigInteger)


class MetricRollup(Base):
    """The values of a series whose arrival ordinal divided by ``8 ** level`` is ``bucket``:
    their count and sum, and the first, smallest, largest and last of them, each with its steps
    and report id (what a chart of a long series reads instead of every report)."""

    __tablename__ = "metric_rollups"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True
    )
    group: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    sum: Mapped[float] = mapped_column(Float)
    first_value: Mapped[float] = mapped_column(Float)
    first_steps: Mapped[int] = mapped_column(BigInteger)
    first_report: Mapped[int] = mapped_column(BigInteger)
    min_value: Mapped[float] = mapped_column(Float)
    min_steps: Mapped[int] = mapped_column(BigInteger)
    min_report: Mapped[int] = mapped_column(BigInteger)
    max_value: Mapped[float] = mapped_column(Float)
    max_steps: Mapped[int] = mapped_column(BigInteger)
    max_report: Mapped[int] = mapped_column(BigInteger)
    last_value: Mapped[float] = mapped_column(Float)
    last_steps: Mapped[int] = mapped_column(BigInteger)
    last_report: Mapped[int] = mapped_column(BigInteger)


class StorageBackend(Base):
    """A checkpoint storage config seen in ``runs/start`` (its id is the ``storageId``)."""

    __tablename__ = "storage_backends"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    config_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    config: Mapped[dict[str, Any]] = mapped_column()


class Checkpoint(Base):
    """A checkpoint reported by a task."""

    __tablename__ = "checkpoints"
    uuid: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str | None] = mapped_column(String(128), index=True)
    allocation_id: Mapped[str | None] = mapped_column(String(160))
    trial_id: Mapped[int | None] = mapped_column(
        ForeignKey("trials.id", ondelete="CASCADE"), index=True
    )
    experiment_id: Mapped[int | None] = mapped_column(Integer, index=True)
    state: Mapped[str] = mapped_column(String(32))
    report_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    resources: Mapped[dict[str, Any]] = mapped_column(default=dict)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    storage_id: Mapped[int | None] = mapped_column(ForeignKey("storage_backends.id"))
    steps_completed: Mapped[int | None] = mapped_column(BigInteger)
    size: Mapped[int] = mapped_column(BigInteger, default=0)


class TaskLog(Base):
    """One line of a task's output."""

    __tablename__ = "task_logs"
    __table_args__ = (Index("ix_task_logs_task", "task_id", "id"), NEVER_REUSE_IDS)
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    allocation_id: Mapped[str | None] = mapped_column(String(160))
    agent_id: Mapped[str | None] = mapped_column(String(255))
    container_id: Mapped[str | None] = mapped_column(String(255))
    rank_id: Mapped[int | None] = mapped_column(Integer)
    timestamp: Mapped[dt.datetime] = mapped_column(default=utcnow)
    level: Mapped[str | None] = mapped_column(String(32))
    stdtype: Mapped[str | None] = mapped_column(String(16))
    source: Mapped[str | None] = mapped_column(String(32))
    log: Mapped[str] = mapped_column(Text)


class LoginFailure(Base):
    """One failed login of a username from a client address
    (:mod:`stalwart.master.services.login_limits`); rows older than the lockout window are
    deleted."""

    __tablename__ = "login_failures"
    __table_args__ = (
        Index("ix_login_failures_key", "username", "address", "failed_at"),
        NEVER_REUSE_IDS,
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(255))
    """Lower-cased, as the limits ignore case."""
    address: Mapped[str] = mapped_column(String(255))
    failed_at: Mapped[dt.datetime] = mapped_column(index=True)


class Agent(Base):
    """An agent daemon that has registered with the master."""

    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    version: Mapped[str] = mapped_column(String(64), default="")
    resource_pool: Mapped[str] = mapped_column(String(255), default="default")
    addresses: Mapped[list[Any]] = mapped_column(default=list)
    registered_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_heartbeat: Mapped[dt.datetime] = mapped_column(default=utcnow)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    connected: Mapped[bool] = mapped_column(Boolean, default=True)
    registered_report: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """SHA-256 of the report (version, pool, addresses, slots) the agent last registered with
    (:func:`~stalwart.master.services.agents.report_digest`): a sync repeating it only
    heartbeats, whichever master worker answers it. Null: register in full at the next sync."""


class AgentCredential(Base):
    """An agent's own token, issued when it enrolled with the cluster's enrollment token
    (:mod:`stalwart.master.services.agent_credentials`). Only the token's SHA-256 is stored.

    No foreign key to ``agents``: an agent enrolls before it registers, and forgetting an agent
    does not forget its credential.
    """

    __tablename__ = "agent_credentials"
    agent_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    """SHA-256 of the token, lower-case hex."""
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    confirmed_at: Mapped[dt.datetime | None] = mapped_column()
    """When the agent first synced with the token (null: issued, not used yet: the enrollment
    token may still replace it, so an enrollment answer lost on the way locks nobody out)."""
    revoked_at: Mapped[dt.datetime | None] = mapped_column()
    """When an admin forbade the agent id (null: live); a revoked id is refused with any token
    until an admin allows it to enroll again (which deletes the row)."""


class Slot(Base):
    """One slot (a GPU, or a CPU slot) of an agent."""

    __tablename__ = "slots"
    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    slot_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    device_type: Mapped[str] = mapped_column(String(16))
    device_brand: Mapped[str] = mapped_column(String(255), default="")
    device_uuid: Mapped[str] = mapped_column(String(255), default="")
    device_index: Mapped[int] = mapped_column(Integer, default=0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    allocation_id: Mapped[str | None] = mapped_column(String(160))


class UserGroup(Base):
    """A named group of users (``det user-group``); workspace roles can be given to it
    (:class:`WorkspaceGroupRole`)."""

    __tablename__ = "user_groups"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)


class UserGroupMember(Base):
    """A user's membership of a group; goes with either."""

    __tablename__ = "user_group_members"
    group_id: Mapped[int] = mapped_column(
        ForeignKey("user_groups.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
        index=True,
    )


class WorkspaceGroupRole(Base):
    """A group's role in a workspace: every member has at least this role there
    (:func:`stalwart.master.policy.workspace_role`)."""

    __tablename__ = "workspace_group_roles"
    __table_args__ = (UniqueConstraint("workspace_id", "group_id"), NEVER_REUSE_IDS)
    id: Mapped[int] = mapped_column(primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    group_id: Mapped[int] = mapped_column(
        ForeignKey("user_groups.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))


class PoolBinding(Base):
    """A resource pool bound to a workspace: a pool with bindings serves only the experiments
    and tasks of its workspaces (:mod:`stalwart.master.services.pool_bindings`); a pool
    without any serves everyone."""

    __tablename__ = "pool_bindings"
    pool_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
        index=True,
    )


class Template(Base):
    """A config template (``det template``): a named, partial config merged under the configs of
    experiments and interactive tasks that name it. Names are unique across the cluster, as in
    Determined; each belongs to one workspace, whose roles say who may read and change it
    (:mod:`stalwart.master.services.templates`)."""

    __tablename__ = "templates"
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    config: Mapped[dict[str, Any]] = mapped_column()
    """The template's settings as the user gave them (a mapping; never defaulted)."""
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Model(Base):
    """A model of the model registry: a named series of versions, each a registered checkpoint
    (:mod:`stalwart.master.services.models`). It belongs to a workspace, whose roles decide who
    sees and changes it."""

    __tablename__ = "models"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    """Unique (case-sensitive); never only digits, so a path segment names one model either by
    its name or by its id."""
    description: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    labels: Mapped[list[Any]] = mapped_column(default=list)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), index=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    creation_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_updated_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_version: Mapped[int] = mapped_column(Integer, default=0)
    """The highest version number handed out; a deleted version's number is never reused."""


class ModelVersion(Base):
    """A version of a model: one registered checkpoint. While any version names a checkpoint,
    checkpoint GC keeps it and deleting it (or its experiment) is refused."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model_id", "version"), NEVER_REUSE_IDS)
    id: Mapped[int] = mapped_column(primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    checkpoint_uuid: Mapped[str] = mapped_column(ForeignKey("checkpoints.uuid"), index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    comment: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    labels: Mapped[list[Any]] = mapped_column(default=list)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    creation_time: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_updated_time: Mapped[dt.datetime] = mapped_column(default=utcnow)


class AccessToken(Base):
    """A user's long-lived access token (``det token create``); only its SHA-256 is stored.

    Unlike a login session it outlives logouts and password changes, and it is never deleted:
    revoking sets ``revoked_at`` (so ``det token list --show-inactive`` still shows it). It works
    while ``revoked_at`` is null, ``expires_at`` is in the future and its user is active
    (:mod:`stalwart.master.services.access_tokens`).
    """

    __tablename__ = "access_tokens"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column()
    expires_at: Mapped[dt.datetime] = mapped_column()
    revoked_at: Mapped[dt.datetime | None] = mapped_column()


class WorkspacePin(Base):
    """A user's pin of a workspace (``det``'s ``pinned`` is the caller's)."""

    __tablename__ = "workspace_pins"
    __table_args__ = (UniqueConstraint("workspace_id", "user_id"), NEVER_REUSE_IDS)
    id: Mapped[int] = mapped_column(primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    pinned_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Webhook(Base):
    """A webhook: where the master posts news of experiments and task logs
    (:mod:`stalwart.master.services.webhooks`).

    ``workspace_id`` None is a global webhook (cluster admins manage it); otherwise it serves
    that workspace's experiments and tasks (its editors and admins manage it). ``mode``
    ``WORKSPACE`` fires for every experiment in scope, ``SPECIFIC`` only for experiments whose
    config names it (``integrations.webhooks.webhook_id`` / ``webhook_name``).
    """

    __tablename__ = "webhooks"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    url: Mapped[str] = mapped_column(Text)
    webhook_type: Mapped[str] = mapped_column(String(16))
    """``DEFAULT`` (JSON event payload) or ``SLACK`` (a Slack message body)."""
    mode: Mapped[str] = mapped_column(String(16), default="WORKSPACE")
    """``WORKSPACE`` or ``SPECIFIC``."""
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class WebhookTrigger(Base):
    """One trigger of a webhook: ``EXPERIMENT_STATE_CHANGE`` with ``condition``
    ``{"state": "COMPLETED"}``, or ``TASK_LOG`` with ``{"regex": "..."}``."""

    __tablename__ = "webhook_triggers"
    __table_args__ = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True)
    webhook_id: Mapped[int] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), index=True
    )
    trigger_type: Mapped[str] = mapped_column(String(32), index=True)
    condition: Mapped[dict[str, Any]] = mapped_column(default=dict)


class WebhookDelivery(Base):
    """One event to post to one webhook: the outbox. Written in the transaction that caused
    the event (a state change, a batch of log lines), so a master killed at any point loses
    none; the deliverer (:mod:`stalwart.master.cluster.webhooks`) posts it and records the
    outcome. ``state``: ``PENDING`` (``next_attempt_at`` says when), ``DELIVERED`` or
    ``FAILED`` (attempts used up, or the receiver refused it with a 4xx)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_due", "state", "next_attempt_at"),
        NEVER_REUSE_IDS,
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    webhook_id: Mapped[int] = mapped_column(Integer, index=True)
    """No foreign key: the row is written in the event's transaction, which a webhook deleted
    meanwhile must not fail; deleting a webhook deletes its rows, and the deliverer drops a
    row whose webhook is gone."""
    event_type: Mapped[str] = mapped_column(String(32))
    url: Mapped[str] = mapped_column(Text)
    """The webhook's URL when the event happened."""
    payload: Mapped[str] = mapped_column(Text)
    """The exact body to post (JSON text); the signature is computed over it at each attempt."""
    state: Mapped[str] = mapped_column(String(16), default="PENDING")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    """When the next attempt is due; while an attempt is in flight, the end of its lease."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(index=True)


class WebhookLogMatch(Base):
    """A task-log trigger that has fired for a task: each fires once per task (the first
    matching line), so a chatty log cannot flood a receiver."""

    __tablename__ = "webhook_log_matches"
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    trigger_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    """No foreign keys (as ``webhook_deliveries``): written while logs are stored, which a task
    or webhook deleted meanwhile must not fail; the deliverer prunes rows of deleted tasks."""


class ImportMapping(Base):
    """What ``stalwart import determined`` has imported (:mod:`stalwart.master.importer`): one
    row per imported thing, written in the transaction that imports it, so a second or an
    interrupted run imports only what is missing.

    ``source`` names the Determined cluster (its ``cluster_id``), ``kind`` the thing (``user``,
    ``experiment``, ``checkpoint``...), ``old_id`` its id (or uuid, or name) there and
    ``new_id`` here (the same where it was free). Kind ``metrics`` is a watermark per trial:
    ``old_id`` the Determined trial, ``new_id`` the highest Determined metrics id imported.
    """

    __tablename__ = "import_mappings"
    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    old_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    new_id: Mapped[str] = mapped_column(String(255))
    imported_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
