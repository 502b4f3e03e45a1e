"""Registry credentials (``environment.registry_auth``) as a Docker config file (pure).

:func:`docker_config` turns Docker's ``AuthConfig`` fields, as an experiment config gives them,
into the ``{"auths": {server: {...}}}`` document that ``docker`` reads from
``$DOCKER_CONFIG/config.json``, that ``podman`` reads from ``$REGISTRY_AUTH_FILE``, and that a
Kubernetes ``kubernetes.io/dockerconfigjson`` Secret holds. The server defaults to Docker Hub's
``https://index.docker.io/v1/``; ``auth`` is the given one or base64 of ``username:password``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

__all__ = ["DOCKER_HUB", "docker_config", "registry_server"]

DOCKER_HUB = "https://index.docker.io/v1/"


def registry_server(auth: Mapping[str, Any]) -> str:
    """The registry the credentials are for (Docker Hub when unnamed)."""
    return str(auth.get("serveraddress") or auth.get("server") or DOCKER_HUB)


def docker_config(auth: Mapping[str, Any]) -> dict[str, Any]:
    """The Docker config document holding ``auth`` (see the module docstring)."""
    token = auth.get("auth")
    if not token:
        pair = f"{auth.get('username') or ''}:{auth.get('password') or ''}"
        token = base64.b64encode(pair.encode()).decode()
    entry = {"auth": str(token)}
    for key in ("username", "password", "email", "identitytoken", "registrytoken"):
        if auth.get(key):
            entry[key] = str(auth[key])
    return {"auths": {registry_server(auth): entry}}
