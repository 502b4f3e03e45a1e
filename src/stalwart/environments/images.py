"""Names and grammar shared by the environments modules: device types, frameworks, image refs."""

from __future__ import annotations

import re
from typing import Literal, get_args

__all__ = [
    "DEVICE_TYPES",
    "FRAMEWORKS",
    "TAG_PATTERN",
    "DeviceType",
    "FrameworkName",
    "is_repository",
    "is_valid_tag",
    "split_image_ref",
]

DeviceType = Literal["cpu", "cuda", "rocm"]
"""A slot's device type, as Determined names it (``gpu`` is only a legacy *image key*)."""

FrameworkName = Literal["pytorch", "tensorflow"]
"""A deep-learning framework an image family can hold."""

DEVICE_TYPES: tuple[DeviceType, ...] = get_args(DeviceType)
FRAMEWORKS: tuple[FrameworkName, ...] = get_args(FrameworkName)

TAG_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""Docker's tag grammar."""

_REPOSITORY = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*")
_REPOSITORY_WITH_HOST = re.compile(r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?" + _REPOSITORY.pattern)


def is_repository(name: str) -> bool:
    """Whether ``name`` is an image repository without a tag (an optional registry host first)."""
    return _REPOSITORY_WITH_HOST.fullmatch(name) is not None


def is_valid_tag(tag: str) -> bool:
    """Whether ``tag`` is a Docker tag that also reads unambiguously in prose.

    Docker's grammar is ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``. We also refuse a trailing ``.`` or
    ``-``, so that ``image:tag.`` at the end of a sentence is never mistaken for part of the tag.
    """
    return TAG_PATTERN.fullmatch(tag) is not None and not tag.endswith((".", "-"))


def split_image_ref(ref: str) -> tuple[str, str | None]:
    """Split ``repo[:tag][@digest]`` into ``(repo, tag)``; a ``docker.io/`` host is dropped.

    ``tag`` is None when the reference has none (a digest-only reference also gives None).
    """
    name = ref.split("@", 1)[0]
    repo, tag = name, None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        repo, tag = name[:colon], name[colon + 1 :]
    for host in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if repo.startswith(host):
            repo = repo[len(host) :]
            break
    return repo, tag
