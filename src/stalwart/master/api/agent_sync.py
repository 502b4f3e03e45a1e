"""Route: ``POST /api/v1/agents/{agent_id}/sync``, the agent protocol's one call.

Authenticated by the cluster's agent token (``X-Stalwart-Agent-Token``), not a user session.
A sync with nothing to change is held up to ``wait_seconds`` (at most a third of
``cluster.agent_timeout``: a held sync is no heartbeat) and answered as soon as work for
the agent appears (a placement wakes ``agent:<id>``; a kill or preemption wakes the
allocation's key, which this long-poll also listens on).
"""

from __future__ import annotations

import functools
import hmac

from fastapi import APIRouter, Request
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from stalwart.agent.protocol import AGENT_TOKEN_HEADER, SyncRequest, SyncResponse
from stalwart.errors import UnauthenticatedError
from stalwart.master.api.deps import long_poll
from stalwart.master.cluster.agent_sync import SyncOutcome, agent_key, apply_sync
from stalwart.master.db.tables import LIVE_CONTAINER_STATES, Container
from stalwart.master.state import MasterState, allocation_key

__all__ = ["router"]

router = APIRouter(tags=["agents"])


def _check_token(state: MasterState, request: Request) -> None:
    given = request.headers.get(AGENT_TOKEN_HEADER, "")
    if not given or not hmac.compare_digest(given, state.agent_token):
        raise UnauthenticatedError(
            "invalid agent token: start the agent with --token (or STALWART_AGENT_TOKEN) set "
            "to the master's agent token (<master home>/agent_token)"
        )


def _sync(
    state: MasterState, agent_id: str, body: SyncRequest, *, register: bool = True
) -> tuple[SyncOutcome, list[str]]:
    grace = state.settings.cluster.kill_grace
    with state.lifecycle, state.sessions() as session:
        outcome = apply_sync(session, agent_id, body, kill_grace=grace, register=register)
        live = list(
            session.scalars(
                select(Container.allocation_id).where(
                    Container.agent_id == agent_id, Container.state.in_(LIVE_CONTAINER_STATES)
                )
            )
        )
    if outcome.changed:
        state.hints.poke()
    return outcome, [allocation_key(a) for a in live]


@router.post("/agents/{agent_id}/sync", response_model=SyncResponse)
async def sync_agent(agent_id: str, body: SyncRequest, request: Request) -> SyncResponse:
    """Record the agent's view; answer what to start, kill and forget (long-polled)."""
    state: MasterState = request.app.state.master
    _check_token(state, request)
    outcome, keys = await run_in_threadpool(_sync, state, agent_id, body)
    # A held sync is no heartbeat: answer well within the agent timeout, so that a quiet agent
    # syncs again (and counts as alive) long before it could be declared lost.
    wait = min(body.wait_seconds, state.settings.cluster.agent_timeout / 3)
    if outcome.has_work or wait <= 0:
        return outcome.response
    woken = await long_poll(request, state.notifier, [agent_key(agent_id), *keys], wait)
    if not woken:
        return outcome.response
    outcome, _ = await run_in_threadpool(
        functools.partial(_sync, state, agent_id, body, register=False)
    )
    return outcome.response
