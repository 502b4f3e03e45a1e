"""Wire models of access tokens (``det token ...``): ``v1TokenInfo``, ``v1PostAccessToken*``,
``v1PatchAccessToken*``, ``v1GetAccessTokensResponse``.

REQUIRED keys the official client reads: ``v1TokenInfo.id`` and ``userId``;
``v1GetAccessTokensResponse.tokenInfo``. ``det token revoke`` and ``edit`` send the token id
as a string (``"5"``), so requests take either.
"""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "GetAccessTokensResponse",
    "PatchAccessTokenRequest",
    "PatchAccessTokenResponse",
    "PostAccessTokenRequest",
    "PostAccessTokenResponse",
    "TokenInfo",
]

ACCESS_TOKEN_TYPE = "TOKEN_TYPE_ACCESS_TOKEN"


class TokenInfo(WireModel):
    """``v1TokenInfo``: one access token, never the token itself."""

    id: int = Field(description="The token's id.")
    user_id: int = Field(description="Whose token it is.")
    description: str | None = Field(default=None, description="What it is for.")
    created_at: str | None = Field(default=None, description="When it was created (RFC 3339).")
    expiry: str | None = Field(default=None, description="When it expires (RFC 3339).")
    revoked: bool = Field(default=False, description="Whether it was revoked.")
    token_type: str = Field(default=ACCESS_TOKEN_TYPE, description="v1TokenType.")


class PostAccessTokenRequest(WireRequest):
    """``v1PostAccessTokenRequest``."""

    user_id: int = Field(description="Whose token to create.")
    lifespan: str | None = Field(
        default=None,
        description='A Go duration ("720h"); absent: 30 days; "-1": the longest.',
    )
    description: str | None = Field(default=None, description="What it is for.")


class PostAccessTokenResponse(WireModel):
    """``v1PostAccessTokenResponse``: the token (shown only now) and its id."""

    token: str = Field(description="The token: keep it secret, it is never shown again.")
    token_id: int = Field(description="The token's id.")


class PatchAccessTokenRequest(WireRequest):
    """``v1PatchAccessTokenRequest``."""

    token_id: int | str | None = Field(default=None, description="The token (as in the path).")
    description: str | None = Field(default=None, description="A new description.")
    set_revoked: bool | None = Field(default=None, description="Revoke it.")


class PatchAccessTokenResponse(WireModel):
    """``v1PatchAccessTokenResponse``."""

    token_info: TokenInfo = Field(description="The token after the change.")


class GetAccessTokensResponse(WireModel):
    """``v1GetAccessTokensResponse``."""

    token_info: list[TokenInfo] = Field(default_factory=list, description="The tokens.")
    pagination: Pagination = Field(default_factory=Pagination, description="Pagination.")
