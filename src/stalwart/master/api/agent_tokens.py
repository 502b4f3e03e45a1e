"""Routes: agents' own tokens, for admins (a Stalwart extension; see docs/security.md).

- ``GET /api/v1/agents/tokens``: every agent credential (agent id, enrolled, first used,
  revoked), never a token or its hash.
- ``DELETE /api/v1/agents/{agent_id}/token[?reenroll=true]``: revoke the agent's token. By
  default the id is **forbidden**: its token and the enrollment token are refused until an admin
  lets it enroll again. With ``reenroll=true`` the credential is deleted: the next sync with
  the enrollment token enrolls the id again (a forbidden id is allowed again this way). 404 for
  an agent id without a credential.

A revocation holds from the agent's very next sync (a sync held by the master is woken and
answered 401); the agent then stops, and the master counts it lost after
``cluster.agent_timeout`` as any silent agent. Rules: :mod:`stalwart.master.services.
agent_credentials`. This router is included before :mod:`stalwart.master.api.agents`, whose
``/agents/{agent_id}`` would otherwise take ``/agents/tokens``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from stalwart.master.api.deps import Caller, SessionDep, StateDep, require_admin
from stalwart.master.api.models.agents import GetAgentTokensResponse, RevokeAgentTokenResponse
from stalwart.master.api.models.common import wire_time
from stalwart.master.api.wire.agents import agent_credential_to_wire
from stalwart.master.services import agent_credentials
from stalwart.master.state import agent_key

__all__ = ["router"]

router = APIRouter(tags=["agents"])

AdminDep = Annotated[Caller, Depends(require_admin)]


@router.get("/agents/tokens", response_model=GetAgentTokensResponse)
def get_agent_tokens(_admin: AdminDep, session: SessionDep) -> GetAgentTokensResponse:
    """Every agent credential, by agent id (admins)."""
    rows = agent_credentials.list_credentials(session)
    return GetAgentTokensResponse(agent_tokens=[agent_credential_to_wire(r) for r in rows])


@router.delete("/agents/{agent_id}/token", response_model=RevokeAgentTokenResponse)
def revoke_agent_token(
    agent_id: str,
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    reenroll: Annotated[
        bool,
        Query(
            description="Delete the credential so that the agent id may enroll again, instead "
            "of forbidding the id."
        ),
    ] = False,
) -> RevokeAgentTokenResponse:
    """Revoke an agent's token (admins): forbid the id, or let it enroll again."""
    row = agent_credentials.revoke(session, agent_id, reenroll=reenroll)
    state.notifier.notify(agent_key(agent_id))  # a held sync answers now: 401
    return RevokeAgentTokenResponse(
        agent_id=agent_id,
        reenroll=reenroll,
        revoked_at=None if row is None else wire_time(row.revoked_at),
    )
