"""Routes: users' access tokens (``det token create/list/describe/edit/revoke``).

- ``POST /api/v1/tokens``: create a token for ``userId`` (one's own; admins: anyone's); the
  answer is the only time the token is shown;
- ``GET /api/v1/tokens``: the tokens the caller may see (``username``, ``tokenIds``,
  ``showInactive``, ``offset``/``limit``);
- ``PATCH /api/v1/tokens/{token_id}``: a new description, or ``setRevoked: true``.

A token then signs requests as ``Authorization: Bearer <token>`` (``det token login``, or
``DET_USER`` + ``DET_USER_TOKEN`` in the environment). Rules:
:mod:`stalwart.master.services.access_tokens`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from stalwart.errors import InvalidArgumentError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import paginate, wire_time
from stalwart.master.api.models.tokens import (
    GetAccessTokensResponse,
    PatchAccessTokenRequest,
    PatchAccessTokenResponse,
    PostAccessTokenRequest,
    PostAccessTokenResponse,
    TokenInfo,
)
from stalwart.master.db.tables import AccessToken
from stalwart.master.services import access_tokens as svc

__all__ = ["router", "token_to_wire"]

router = APIRouter(tags=["tokens"])

_SORT_KEYS = {
    "SORT_BY_USER_ID": lambda t: (t.user_id, t.id),
    "SORT_BY_EXPIRY": lambda t: (t.expires_at, t.id),
    "SORT_BY_CREATED_AT": lambda t: (t.created_at, t.id),
    "SORT_BY_DESCRIPTION": lambda t: (t.description or "", t.id),
    "SORT_BY_REVOKED": lambda t: (t.revoked_at is not None, t.id),
}


def token_to_wire(row: AccessToken) -> TokenInfo:
    """The wire form of a token row (never the token or its hash)."""
    return TokenInfo(
        id=row.id,
        user_id=row.user_id,
        description=row.description or "",
        created_at=wire_time(row.created_at),
        expiry=wire_time(row.expires_at),
        revoked=row.revoked_at is not None,
    )


@router.post("/tokens", response_model=PostAccessTokenResponse)
def post_access_token(
    body: PostAccessTokenRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> PostAccessTokenResponse:
    """Create an access token (one's own; admins: anyone's)."""
    token, row = svc.create_token(
        session,
        caller.user,
        body.user_id,
        lifespan=body.lifespan,
        description=body.description,
        now=state.clock.now(),
    )
    return PostAccessTokenResponse(token=token, token_id=row.id)


@router.get("/tokens", response_model=GetAccessTokensResponse)
def get_access_tokens(
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    username: str | None = None,
    token_ids: Annotated[list[int] | None, Query(alias="tokenIds")] = None,
    show_inactive: Annotated[bool, Query(alias="showInactive")] = False,
    sort_by: Annotated[str | None, Query(alias="sortBy")] = None,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    offset: int = 0,
    limit: int = 0,
) -> GetAccessTokensResponse:
    """The access tokens the caller may see: their own; an admin's: everyone's."""
    rows = svc.list_tokens(
        session,
        caller.user,
        username=username or None,
        token_ids=token_ids or (),
        show_inactive=show_inactive,
        now=state.clock.now(),
    )
    key = _SORT_KEYS.get(sort_by or "")
    if key is not None:
        rows.sort(key=key)
    if order_by == "ORDER_BY_DESC":
        rows.reverse()
    start, end, pagination = paginate(len(rows), offset, limit)
    return GetAccessTokensResponse(
        token_info=[token_to_wire(r) for r in rows[start:end]], pagination=pagination
    )


@router.patch("/tokens/{token_id}", response_model=PatchAccessTokenResponse)
def patch_access_token(
    token_id: int,
    body: PatchAccessTokenRequest,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> PatchAccessTokenResponse:
    """Change a token's description, or revoke it (``setRevoked: true``)."""
    if body.token_id not in (None, "") and str(body.token_id) != str(token_id):
        raise InvalidArgumentError(
            f"the body's tokenId ({body.token_id}) is not the token in the path ({token_id})"
        )
    patch = svc.TokenPatch(description=body.description, revoke=bool(body.set_revoked))
    row = svc.patch_token(session, caller.user, token_id, patch, now=state.clock.now())
    return PatchAccessTokenResponse(token_info=token_to_wire(row))
