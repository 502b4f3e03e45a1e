"""Routes: config templates (``det template list|describe|set|create|set-value|remove``).

``GET /api/v1/templates``, ``GET|POST|PUT|PATCH|DELETE /api/v1/templates/{name}`` and
``PATCH /api/v1/template/rename``, with Determined's shapes. Who may do what is
:mod:`stalwart.master.services.templates`'s business.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import Empty, paginate
from stalwart.master.api.models.templates import (
    GetTemplatesResponse,
    RenameTemplateRequest,
    TemplateRequest,
    TemplateResponse,
    V1Template,
)
from stalwart.master.db.tables import Template
from stalwart.master.services import templates as svc

__all__ = ["router", "template_to_wire"]

router = APIRouter(tags=["templates"])


def template_to_wire(template: Template) -> V1Template:
    """The ``v1Template`` of a row."""
    return V1Template(
        name=template.name, config=dict(template.config), workspace_id=template.workspace_id
    )


@router.get("/templates", response_model=GetTemplatesResponse)
def get_templates(
    caller: CallerDep,
    session: SessionDep,
    name: str | None = None,
    workspace_ids: Annotated[list[int] | None, Query(alias="workspaceIds")] = None,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    offset: int = 0,
    limit: Annotated[int, Query(ge=0)] = 0,
) -> GetTemplatesResponse:
    """The templates the caller may read, by name (``name``: a substring, any case)."""
    found = svc.list_templates(
        session,
        caller.user,
        name=name,
        workspace_ids=workspace_ids or (),
        descending=order_by == "ORDER_BY_DESC",
    )
    start, end, page = paginate(len(found), offset, limit)
    return GetTemplatesResponse(
        templates=[template_to_wire(t) for t in found[start:end]], pagination=page
    )


@router.get("/templates/{template_name}", response_model=TemplateResponse)
def get_template(template_name: str, caller: CallerDep, session: SessionDep) -> TemplateResponse:
    """One template (404 when there is none the caller may read)."""
    return TemplateResponse(
        template=template_to_wire(svc.get_template(session, caller.user, template_name))
    )


@router.post("/templates/{template_name}", response_model=TemplateResponse)
def post_template(
    template_name: str, body: TemplateRequest, caller: CallerDep, session: SessionDep
) -> TemplateResponse:
    """Create a template (``det template create``, and ``set`` of a new name)."""
    template = svc.create_template(
        session, caller.user, template_name, body.config, body.workspace_id
    )
    wire = template_to_wire(template)
    session.commit()
    return TemplateResponse(template=wire)


@router.put("/templates/{template_name}", response_model=TemplateResponse)
def put_template(
    template_name: str, body: TemplateRequest, caller: CallerDep, session: SessionDep
) -> TemplateResponse:
    """Create or replace a template in workspace 1 (an upsert)."""
    template = svc.put_template(session, caller.user, template_name, body.config, body.workspace_id)
    wire = template_to_wire(template)
    session.commit()
    return TemplateResponse(template=wire)


@router.patch("/templates/{template_name}", response_model=TemplateResponse)
def patch_template_config(
    template_name: str,
    caller: CallerDep,
    session: SessionDep,
    body: Annotated[Any, Body()] = None,
) -> TemplateResponse:
    """Replace a template's config (the body is the config itself)."""
    template = svc.update_template_config(session, caller.user, template_name, body)
    wire = template_to_wire(template)
    session.commit()
    return TemplateResponse(template=wire)


@router.patch("/template/rename", response_model=TemplateResponse)
def rename_template(
    body: RenameTemplateRequest, caller: CallerDep, session: SessionDep
) -> TemplateResponse:
    """Rename a template."""
    template = svc.rename_template(session, caller.user, body.old_name, body.new_name)
    wire = template_to_wire(template)
    session.commit()
    return TemplateResponse(template=wire)


@router.delete("/templates/{template_name}", response_model=Empty)
def delete_template(template_name: str, caller: CallerDep, session: SessionDep) -> Empty:
    """Remove a template."""
    svc.delete_template(session, caller.user, template_name)
    session.commit()
    return Empty()
