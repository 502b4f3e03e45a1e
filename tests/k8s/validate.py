"""Validation of Kubernetes objects against the OpenAPI schemas of the versions Stalwart supports.

:data:`SUPPORTED_VERSIONS` are the Kubernetes minor versions Stalwart's manifests (the resource
manager's objects and the Helm chart) are checked against, with kubernetes-validate's strict
schemas (unknown fields are errors too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]

__all__ = ["SUPPORTED_VERSIONS", "assert_valid"]

SUPPORTED_VERSIONS = ("1.29", "1.30", "1.31", "1.32")


def assert_valid(
    objects: Iterable[Mapping[str, Any]], versions: Iterable[str] = SUPPORTED_VERSIONS
) -> None:
    """Raise AssertionError naming the object, version and field of the first invalid one."""
    for obj in objects:
        for version in versions:
            try:
                kubernetes_validate.validate(dict(obj), version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
                raise AssertionError(
                    f"{name} is not valid Kubernetes {version}: {where}: {exc.message}"
                ) from None
