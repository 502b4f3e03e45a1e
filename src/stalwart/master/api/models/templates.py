"""Wire models of config templates: ``v1Template`` and the template requests and responses."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "GetTemplatesResponse",
    "RenameTemplateRequest",
    "TemplateRequest",
    "TemplateResponse",
    "V1Template",
]


class V1Template(WireModel):
    """``v1Template``: REQUIRED name, config (an object) and workspaceId."""

    name: str = Field(description="The template's unique name.")
    config: dict[str, Any] = Field(description="Its settings, as given.")
    workspace_id: int = Field(description="The workspace it belongs to.")


class TemplateRequest(WireRequest):
    """The ``v1Template`` body of ``POST``/``PUT /api/v1/templates/{name}`` (the name in the
    path wins, as grpc-gateway binds it)."""

    name: str | None = Field(default=None, description="Ignored: the path names the template.")
    config: Any = Field(default=None, description="Its settings (a mapping).")
    workspace_id: int | None = Field(default=None, description="Its workspace (0: workspace 1).")


class RenameTemplateRequest(WireRequest):
    """``v1PatchTemplateNameRequest``."""

    old_name: str = Field(description="The template's name now.")
    new_name: str = Field(description="Its new name.")


class TemplateResponse(WireModel):
    """``v1{Get,Post,Put,PatchTemplateConfig,PatchTemplateName}TemplateResponse``."""

    template: V1Template = Field(description="The template.")


class GetTemplatesResponse(WireModel):
    """``v1GetTemplatesResponse``."""

    templates: list[V1Template] = Field(default_factory=list, description="The templates.")
    pagination: Pagination = Field(description="Paging.")
