"""Route: ``POST /api/v1/agents/{agent_id}/sync``, the agent protocol's one call.

Authenticated by an agent token (``X-Stalwart-Agent-Token``), not a user session: the agent's
own token, or the cluster's enrollment token for an agent id without a credential
(:mod:`stalwart.master.services.agent_credentials` has the rules). The token is checked before
the body is read, so a caller without one learns nothing from validation errors (401 whatever
the body). An enrolling sync is answered with the agent's new token only (``agent_token``):
nothing is recorded and no work is given until the agent syncs with that token. On a master
whose resource manager runs batch jobs (:class:`~stalwart.master.rm.base.BatchLauncher`), the
agent id its containers are recorded under is refused (403): no agent may sync as it.

The agent's view is recorded first; then, when the agent allows a wait (``wait_seconds``, at
most a third of ``cluster.agent_timeout``: a held sync is no heartbeat):

- a sync that brought news for the cluster loop (an exit, a new agent) is held until the loop
  has run a round on it (at most ``_ROUND_WAIT_S``), so that the answer already carries what
  that round placed on this agent: a slot freed by an exit is refilled in one exchange;
- a sync with nothing to change is held until work for the agent appears (a placement wakes
  ``agent:<id>``; a kill or preemption wakes the allocation's key; a revocation of the agent's
  token wakes ``agent:<id>`` too).

A sync that waited checks its credential again before it answers: one revoked meanwhile gets
401, never the work placed during the wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from stalwart import handovers
from stalwart.agent.protocol import AGENT_TOKEN_HEADER, SyncRequest, SyncResponse
from stalwart.errors import ForbiddenError, UnauthenticatedError
from stalwart.master.api.deps import long_poll
from stalwart.master.api.trials import _body_doc
from stalwart.master.cluster.agent_sync import SyncOutcome, apply_sync, store_exit_reports
from stalwart.master.db.tables import LIVE_CONTAINER_STATES, Container
from stalwart.master.rm.base import BatchLauncher
from stalwart.master.services import agent_credentials
from stalwart.master.services.agent_credentials import Verdict
from stalwart.master.state import ROUND_KEY, MasterState, agent_key, allocation_key

__all__ = ["router"]

router = APIRouter(tags=["agents"])

_ROUND_WAIT_S = 1.0
"""Longest hold of a sync that brought news, waiting for the loop's round on it."""


def _authenticate(state: MasterState, agent_id: str, presented: str) -> Verdict:
    """The verdict on the presented token (401 when refused); 403 for a reserved agent id."""
    with state.sessions() as session:
        verdict = agent_credentials.authenticate(session, agent_id, presented, state.agent_token)
        rm = state.rm
        if isinstance(rm, BatchLauncher) and agent_id == rm.container_agent:
            raise ForbiddenError(
                f"agent id {agent_id!r} is reserved: this master's resource manager records its "
                "batch jobs' containers under it; start the agent with another --id"
            )
        if verdict.confirm:
            agent_credentials.confirm(session, verdict)
    return verdict


@dataclass(frozen=True)
class _Authorized:
    verdict: Verdict
    body: SyncRequest


async def _authorized_body(agent_id: str, request: Request) -> _Authorized:
    """The sync's body, read only once the agent token is known good, with the verdict."""
    state: MasterState = request.app.state.master
    presented = request.headers.get(AGENT_TOKEN_HEADER, "")
    verdict = await run_in_threadpool(_authenticate, state, agent_id, presented)
    try:
        body = SyncRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None
    return _Authorized(verdict, body)


def _enroll(state: MasterState, agent_id: str) -> SyncResponse:
    """The enrollment answer: the agent's new token, and nothing else."""
    with state.sessions() as session:
        token = agent_credentials.enroll(session, agent_id)
    return SyncResponse(agent_token=token, kill_grace_seconds=state.settings.cluster.kill_grace)


def _sync(state: MasterState, agent_id: str, body: SyncRequest) -> _Recorded:
    grace = state.settings.cluster.kill_grace
    prepull = state.prepull.images(body.resource_pool)  # outside the lock: may query
    with state.step() as session:
        store_exit_reports(session, agent_id, body)  # before the exits they came with
        outcome = apply_sync(
            session,
            agent_id,
            body,
            kill_grace=grace,
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


def _answer(state: MasterState, agent_id: str, body: SyncRequest, token_hash: str) -> SyncOutcome:
    """The answer after a long-poll woke up: read-only, so it never waits for a round; 401 when
    the agent's credential was revoked (or replaced) during the wait."""
    with state.sessions() as session:
        if not agent_credentials.still_valid(session, agent_id, token_hash):
            raise UnauthenticatedError(
                f"the token of agent {agent_id!r} was revoked while its sync waited"
            )
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
    agent_id: str, auth: Annotated[_Authorized, Depends(_authorized_body)], request: Request
) -> SyncResponse:
    """Record the agent's view; answer what to start, kill and forget (long-polled). An
    enrolling sync gets the agent's token instead (see the module docstring)."""
    state: MasterState = request.app.state.master
    if auth.verdict.enroll:
        return await run_in_threadpool(_enroll, state, agent_id)
    body, token_hash = auth.body, auth.verdict.token_hash
    assert token_hash is not None
    if handovers.ON:
        exited = [c.allocation_id for c in body.containers if c.state == "EXITED"]
        handovers.mark("master.sync_received", exited)
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
        return (await run_in_threadpool(_answer, state, agent_id, body, token_hash)).response
    if outcome.has_work:
        return outcome.response
    keys = [agent_key(agent_id), *recorded.keys]
    if not await long_poll(request, state.notifier, keys, wait):
        return outcome.response
    return (await run_in_threadpool(_answer, state, agent_id, body, token_hash)).response
