"""``create_app(settings)``: the master's FastAPI application.

Nothing happens at import time. The lifespan opens the database, runs the migrations, creates the
built-in users and workspace, binds the in-process buses and attaches the master's log ring (the
records behind ``/api/v1/master/logs``) to the root logger; it disposes of the engine on exit.

The app's :class:`~stalwart.master.stopping.StopGate` (``app.state.stop_gate``) is begun by the
server on SIGTERM (:mod:`stalwart.master.serve`), else by the lifespan as it ends: new requests
get 503, waits end, requests in flight get a short grace (see :mod:`stalwart.master.stopping`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from stalwart import __version__
from stalwart.master.api import (
    agent_sync,
    agent_tokens,
    agents,
    allocations,
    auth,
    batch,
    checkpoints,
    experiment_bulk,
    experiment_continue,
    experiment_details,
    experiment_search,
    experiments,
    info,
    interactive,
    jobs,
    legacy,
    log_retention,
    logs,
    metric_streams,
    model_registry,
    pool_bindings,
    prepull,
    project_columns,
    projects,
    proxy,
    rbac,
    runs,
    tasks,
    templates,
    tokens,
    trial_series,
    trials,
    unmanaged,
    usage,
    user_groups,
    user_settings,
    users,
    webhooks,
    workspace_roles,
    workspaces,
)
from stalwart.master.api.browser import SecurityHeadersMiddleware
from stalwart.master.api.compression import CompressionMiddleware
from stalwart.master.api.conditional import ConditionalGetMiddleware
from stalwart.master.api.errors import database_error_is_transient, install_error_handlers
from stalwart.master.api.middleware import WireMiddleware
from stalwart.master.api.timing import ServerTimingMiddleware
from stalwart.master.coordination import Leadership, run_dir
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import MasterMeta
from stalwart.master.duties import Duties
from stalwart.master.home import prepare_home
from stalwart.master.proxy import close_clients
from stalwart.master.rm.build import build_resource_manager
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.logs import install_log_wakeups
from stalwart.master.services.webhook_events import install_webhook_outbox
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from stalwart.master.stopping import StopGate, StopMiddleware
from stalwart.master.transitions import install_event_publisher, log_experiment_change
from stalwart.master.ui import mount_ui

__all__ = ["create_app", "open_state", "with_database_retries"]

API_PREFIX = "/api/v1"

log = logging.getLogger("stalwart.master")


def _cluster_id(session: Session) -> str:
    found = session.get(MasterMeta, "cluster_id")
    if found is None:
        found = MasterMeta(key="cluster_id", value=str(uuid.uuid4()))
        session.add(found)
        session.commit()
    return found.value


def _agent_token(session: Session, settings: MasterSettings) -> str:
    """The cluster's enrollment token: the configured one, or the cluster's generated one
    (written to ``<home>/agent_token``, mode 0600, for local agents to read). It only enrolls
    agents, which then sync with tokens of their own
    (:mod:`stalwart.master.services.agent_credentials`)."""
    if settings.cluster.agent_token:
        return settings.cluster.agent_token
    found = session.get(MasterMeta, "agent_token")
    if found is None:
        found = MasterMeta(key="agent_token", value=secrets.token_urlsafe(32))
        session.add(found)
        session.commit()
    path = settings.home / "agent_token"
    if not path.exists() or path.read_text(encoding="utf-8").strip() != found.value:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_text(found.value + "\n", encoding="utf-8")
    return found.value


def open_state(settings: MasterSettings) -> MasterState:
    """Open the database (migrated, bootstrapped) and build the master's state, its resource
    manager included (no engine is called yet)."""
    default_storage = None if settings.checkpoint_storage else settings.home / "checkpoints"
    prepare_home(settings.home, default_checkpoints=default_storage)
    engine = make_engine(settings.database_url)
    with_database_retries("migrating the database", lambda: _migrate(engine))
    sessions = make_session_factory(engine)
    state = MasterState(settings=settings, engine=engine, sessions=sessions)
    install_event_publisher(sessions, state.bus)
    install_log_wakeups(sessions, state.notifier)
    install_webhook_outbox(sessions, state.webhook_wake, base_url=settings.webhooks.base_url)

    def prepare() -> None:
        with sessions() as session:
            bootstrap(session, settings.security.initial_user_password)
            state.cluster_id = _cluster_id(session)
            state.agent_token = _agent_token(session, settings)

    with_database_retries("preparing the database", prepare)
    state.rm = build_resource_manager(state)
    state.serving_since = state.clock.monotonic()
    return state


def _migrate(engine: Engine) -> None:
    """Bring the schema to the head; a new SQLite database from the schema cache when
    ``STALWART_SQLITE_SCHEMA_CACHE`` names one (:func:`.migrate.copy_cached_schema`)."""
    cache = os.environ.get(migrate.SCHEMA_CACHE_VARIABLE)
    if cache:
        migrate.copy_cached_schema(engine, Path(cache))
    migrate.upgrade(engine)


STARTUP_RETRY_DEADLINE_S = 60.0
"""How long the master's start-up retries a step the database fails transiently."""

T = TypeVar("T")


def with_database_retries(
    what: str,
    step: Callable[[], T],
    *,
    deadline_s: float = STARTUP_RETRY_DEADLINE_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``step()``, run again while the database fails it transiently (its backend terminated,
    a serialization failure, SQLite locked: ``api.errors.database_error_is_transient``),
    waiting 0.5 s and doubling to 5 s, until ``deadline_s`` would pass; then the last error is
    raised. Start-up steps are idempotent (migrations run in a transaction on PostgreSQL; the
    bootstrap creates only what is missing), so a master started while its database blips
    starts anyway instead of exiting."""
    started = clock()
    wait = 0.5
    while True:
        try:
            return step()
        except DBAPIError as exc:
            late = clock() + wait - started > deadline_s
            if late or not database_error_is_transient(exc):
                raise
            log.warning(
                "%s: the database failed (%s); trying again in %.1f s",
                what,
                str(exc.orig).strip().splitlines()[0] if exc.orig else exc,
                wait,
            )
            sleep(wait)
            wait = min(wait * 2, 5.0)


def create_app(
    settings: MasterSettings, *, run_cluster: bool = True, master_id: str | None = None
) -> FastAPI:
    """The master application for ``settings``.

    ``run_cluster``: run the background duties (:class:`~stalwart.master.duties.Duties`: the
    cluster loop with scheduling, searchers and lifecycle; webhooks; retention) with the app;
    API tests that drive state by hand turn it off. With ``settings.workers`` > 1 the app is
    one worker of several (:mod:`stalwart.master.supervisor`, which passes the master's
    ``master_id``): it joins the others (:meth:`MasterState.join_workers`) and runs the duties
    only while it leads (:class:`~stalwart.master.coordination.Leadership`).
    """

    gate = StopGate()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = open_state(settings)
        if master_id is not None:
            state.master_id = master_id
        state.serving_since = None  # until the server listens (below, as the lifespan yields)
        state.notifier.bind(asyncio.get_running_loop())
        gate.on_stop(state.notifier.close)  # long-polls answer, follows end
        gate.on_stop(state.log_ring.stop_followers)
        gate.bind(asyncio.get_running_loop())
        app.state.master = state
        with state.log_ring.attached():
            log.info(
                "Stalwart %s master %s serving cluster %s (database: %s)",
                __version__,
                state.master_id,
                state.cluster_id,
                settings.database_url.split("://", 1)[0],
            )
            unsubscribe = state.bus.subscribe(log_experiment_change)
            relay = state.join_workers() if settings.workers > 1 else None
            duties = Duties(state) if run_cluster else None
            leadership = None
            if duties is not None and relay is not None:
                leadership = Leadership(run_dir(settings.home) / "leader.lock", duties.start)
                leadership.start()
            elif duties is not None:
                duties.start()
            try:
                state.serving_since = state.clock.monotonic()  # uvicorn listens once we yield
                yield
            finally:
                gate.begin()  # when the server did not (tests, an embedding server)
                if leadership is not None:
                    leadership.stop()
                if duties is not None:
                    duties.stop()
                if relay is not None:
                    relay.close()
                state.rm.close()
                await close_clients()  # the proxy's connections to tasks
                log.info("master %s stopping", state.master_id)
                unsubscribe()
                state.engine.dispose()

    app = FastAPI(
        title="Stalwart master",
        version=__version__,
        description="Stalwart's REST API, in Determined's v1 dialect.",
        lifespan=lifespan,
    )
    app.state.stop_gate = gate
    install_error_handlers(app)
    app.add_middleware(ConditionalGetMiddleware)  # ETag / 304 on whole JSON GET answers
    app.add_middleware(ServerTimingMiddleware)  # outside it: a 304's time is measured too
    app.add_middleware(WireMiddleware, max_request_bytes=settings.limits.max_request_bytes)
    app.add_middleware(CompressionMiddleware)  # outside them: they see uncompressed bodies
    app.add_middleware(StopMiddleware, gate=gate)  # a stop answers before the app does anything
    app.add_middleware(SecurityHeadersMiddleware)  # outermost: every answer carries them
    app.include_router(info.info_router)
    app.include_router(logs.legacy_router)  # POST /task-logs: Determined's legacy log shipping
    app.include_router(proxy.router)  # /proxy/{task_id}/...: interactive tasks' services
    for module in (
        info,
        auth,
        user_settings,
        users,
        experiments,
        unmanaged,  # before trials: PATCH /trials/{id} and /trials/{id}/start
        experiment_bulk,
        experiment_search,
        experiment_details,
        metric_streams,
        trial_series,  # before trials: /trials/{trial_id} would take /trials/time-series
        trials,
        runs,
        checkpoints,
        logs,
        log_retention,
        agent_tokens,  # before agents: /agents/{agent_id} would take /agents/tokens
        agents,
        agent_sync,
        tasks,
        interactive,
        allocations,
        batch,
        workspace_roles,
        workspaces,
        projects,
        project_columns,
        prepull,
        user_groups,
        pool_bindings,
        rbac,
        templates,
        experiment_continue,
        model_registry,
        tokens,
        jobs,
        usage,
        webhooks,
    ):
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(usage.csv_router)  # /resources/allocation/...: CSV, outside /api/v1
    app.include_router(legacy.router)  # /tasks, /checkpoints/{uuid}, /experiments/{id}/preview_gc
    mount_ui(app, api_prefix=API_PREFIX)  # the web UI at / (docs/ui.md)
    return app
