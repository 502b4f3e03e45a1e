"""Route: ``POST /api/v1/agents/{agent_id}/sync``, the agent protocol's one call.

Authenticated by the cluster's agent token (``X-Stalwart-Agent-Token``), not a user session;
the token is checked before the body is read, so a caller without it learns nothing from
validation errors (401 whatever the body).
The agent's view is recorded first; then, when the agent allows a wait (``wait_seconds``, at
most a third of ``cluster.agent_timeout``: a held sync is no heartbeat):

- a sync that brought news for the cluster loop (an exit, a new agent) is held until the loop
  has run a round on it (at most ``_ROUND_WAIT_S``), so that the answer already carries what
  that round placed on this agent: a slot freed by an exit is refilled in one exchange;
- a sync with nothing to change is held until work for the agent appears (a placement wakes
  ``agent:<id>``; a kill or preemption wakes the allocation's key).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from stalwart.agent.protocol import AGENT_TOKEN_HEADER, SyncRequest, SyncResponse
from stalwart.errors import UnauthenticatedError
from stalwart.master.api.deps import long_poll
from stalwart.master.api.trials import _body_doc
from stalwart.master.cluster.agent_sync import SyncOutcome, apply_sync
from stalwart.master.db.tables import LIVE_CONTAINER_STATES, Container
from stalwart.master.state import ROUND_KEY, MasterState, agent_key, allocation_key

__all__ = ["router"]

router = APIRouter(tags=["agents"])

_ROUND_WAIT_S = 1.0
"""Longest hold of a sync that brought news, waiting for the loop's round on it."""


def _check_token(state: MasterState, request: Request) -> None:
    given = request.headers.get(AGENT_TOKEN_HEADER, "")
    if not given or not hmac.compare_digest(given, state.agent_token):
        raise UnauthenticatedError(
            "invalid agent token: start the agent with --token (or STALWART_AGENT_TOKEN) set "
            "to the master's agent token (<master home>/agent_token)"
        )


async def _authorized_body(request: Request) -> SyncRequest:
    """The sync's body, read only once the agent token is known good."""
    state: MasterState = request.app.state.master
    _check_token(state, request)
    try:
        return SyncRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None


def _sync(state: MasterState, agent_id: str, body: SyncRequest) -> _Recorded:
    grace = state.settings.cluster.kill_grace
    prepull = state.prepull.images(body.resource_pool)  # outside the lock: may query
    with state.step() as session:
        outcome = apply_sync(
            session,
            agent_id,
            body,
            kill_grace=grace,
            registered=state.agent_reports,
            prepull=prepull,
            now=state.clock.now(),
        )
        live = list(
            session.scalars(
                select(Container.allocation_id).where(
                    Container.agent_id == agent_id, Container.state.in_(LIVE_CONTAINER_STATES)
                )
            )
        )
        # Under the lock: every round past this one acts on what was just recorded.
        rounds = state.hints.rounds_begun
    if outcome.changed:
        state.hints.poke()
    return _Recorded(outcome, [allocation_key(a) for a in live], rounds)


def _answer(state: MasterState, agent_id: str, body: SyncRequest) -> SyncOutcome:
    """The answer after a long-poll woke up: read-only, so it never waits for a round."""
    with state.sessions() as session:
        return apply_sync(
            session,
            agent_id,
            body,
            kill_grace=state.settings.cluster.kill_grace,
            record=False,
            prepull=state.prepull.images(body.resource_pool),
        )


@dataclass(frozen=True)
class _Recorded:
    outcome: SyncOutcome
    keys: list[str]  # the notifier keys of the agent's live allocations
    rounds: int  # rounds whose database phase had begun when the view was recorded


@router.post(
    "/agents/{agent_id}/sync",
    response_model=SyncResponse,
    openapi_extra=_body_doc(SyncRequest),  # the body is read by _authorized_body
)
async def sync_agent(
    agent_id: str, body: Annotated[SyncRequest, Depends(_authorized_body)], request: Request
) -> SyncResponse:
    """Record the agent's view; answer what to start, kill and forget (long-polled)."""
    state: MasterState = request.app.state.master
    recorded = await run_in_threadpool(_sync, state, agent_id, body)
    outcome = recorded.outcome
    wait = min(body.wait_seconds, state.settings.cluster.agent_timeout / 3)
    if wait <= 0:
        return outcome.response
    if outcome.changed:
        hints = state.hints
        await state.notifier.wait_until(
            [ROUND_KEY], lambda: hints.rounds_done > recorded.rounds, min(wait, _ROUND_WAIT_S)
        )
        return (await run_in_threadpool(_answer, state, agent_id, body)).response
    if outcome.has_work:
        return outcome.response
    keys = [agent_key(agent_id), *recorded.keys]
    if not await long_poll(request, state.notifier, keys, wait):
        return outcome.response
    return (await run_in_threadpool(_answer, state, agent_id, body)).response
