"""Config templates in the SDK: named, partial configs merged under experiment and task configs.

The master's rules (:mod:`stalwart.master.services.templates`): names are unique in the cluster,
a template belongs to a workspace (default 1), viewers of the workspace read it and editors
change it. :class:`~stalwart.client.Client` exposes :func:`set_template`, :func:`get_template`,
:func:`list_templates` and :func:`remove_template`; ``template=NAME`` on
``Client.create_experiment`` and the ``launch_*`` methods applies one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from stalwart.client.models import GetTemplatesResponse, TemplateResponse, V1Template
from stalwart.client.session import Session
from stalwart.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "TemplateConfig",
    "get_template",
    "list_templates",
    "remove_template",
    "set_template",
    "template_mapping",
]

TemplateConfig = str | Path | Mapping[str, Any]
"""A template's settings: YAML text (``str``), a YAML file (``Path``) or a mapping."""


def template_mapping(config: TemplateConfig) -> dict[str, Any]:
    """The settings as a dict (InvalidArgumentError when they are not a YAML mapping)."""
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, Path):
        try:
            text = config.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot read template file {config}: {exc.strerror}"
            ) from exc
    else:
        text = config
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise InvalidArgumentError(
            "a template must be a mapping of settings (YAML keys and values, like an experiment "
            "config)"
        )
    return data


def _path(name: str) -> str:
    return f"/api/v1/templates/{quote(name, safe='')}"


def get_template(session: Session, name: str) -> V1Template:
    """One template (NotFoundError when there is none the caller may read)."""
    return session.get(_path(name), TemplateResponse).template


def list_templates(session: Session, name: str | None = None) -> list[V1Template]:
    """The templates the caller may read, by name (``name``: a substring, any case)."""
    params = {"name": name} if name else None
    return session.get("/api/v1/templates", GetTemplatesResponse, params).templates


def set_template(
    session: Session, name: str, config: TemplateConfig, *, workspace_id: int | None = None
) -> V1Template:
    """Create template ``name`` (in ``workspace_id``, default 1) or replace its settings, as
    ``det template set`` does."""
    data = template_mapping(config)
    try:
        get_template(session, name)
    except NotFoundError:
        body = {"name": name, "config": data, "workspaceId": workspace_id or 0}
        return TemplateResponse.model_validate(session.post(_path(name), body)).template
    answer = session.request("PATCH", _path(name), body=data)
    return TemplateResponse.model_validate(answer).template


def remove_template(session: Session, name: str) -> None:
    """Remove template ``name`` (experiments and tasks made with it keep their configs)."""
    session.request("DELETE", _path(name))
