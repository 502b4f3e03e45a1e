"""Access tokens through the SDK (``Client.create_token`` and friends): long-lived tokens a user
makes for scripts and CI, the master's ``/api/v1/tokens`` (rules:
:mod:`stalwart.master.services.access_tokens`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stalwart.client.session import Session
from stalwart.master.api.models.tokens import (
    GetAccessTokensResponse,
    PatchAccessTokenResponse,
    PostAccessTokenResponse,
    TokenInfo,
)

__all__ = ["TokenInfo", "create_token", "edit_token", "lifespan_of_days", "list_tokens"]


def lifespan_of_days(days: int | None) -> str | None:
    """``--expiration-days`` as the master's lifespan: ``"-1"`` (the longest) for -1, else
    hours (``"48h"``); None for the master's default (30 days)."""
    if days is None:
        return None
    return "-1" if days == -1 else f"{24 * days}h"


def create_token(
    session: Session, user_id: int, *, lifespan: str | None, description: str | None
) -> PostAccessTokenResponse:
    body: dict[str, Any] = {"userId": user_id}
    if lifespan is not None:
        body["lifespan"] = lifespan
    if description is not None:
        body["description"] = description
    return PostAccessTokenResponse.model_validate(session.post("/api/v1/tokens", body))


def list_tokens(
    session: Session,
    *,
    username: str | None = None,
    token_ids: Sequence[int] = (),
    show_inactive: bool = False,
) -> list[TokenInfo]:
    params: dict[str, Any] = {"showInactive": "true" if show_inactive else "false"}
    if username:
        params["username"] = username
    if token_ids:
        params["tokenIds"] = list(token_ids)
    return session.get("/api/v1/tokens", GetAccessTokensResponse, params).token_info


def edit_token(
    session: Session, token_id: int, *, description: str | None = None, revoke: bool = False
) -> TokenInfo:
    body: dict[str, Any] = {"tokenId": token_id, "setRevoked": revoke}
    if description is not None:
        body["description"] = description
    data = session.request("PATCH", f"/api/v1/tokens/{token_id}", body=body)
    return PatchAccessTokenResponse.model_validate(data).token_info
