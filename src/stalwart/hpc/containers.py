"""Tasks in containers on batch systems: apptainer/singularity, podman, enroot (pure).

Contract: every function is pure (no filesystem, no processes); the launcher
(:mod:`stalwart.hpc.task`) and ``stalwart envs precache`` run what they return.

- :func:`image_source`: where a tool gets an image: ``docker://<image>`` unless the name already
  says (``docker://``, ``oras://``, ``library://``, ``shub://``, a ``.sif`` or ``.sqsh`` path).
- :func:`cached_image`: the image's file in the cache directory (``image_cache_dir``):
  ``<name>-<hash>.sif`` for apptainer/singularity, ``.sqsh`` for enroot; None for podman, which
  keeps images in its own storage, and for ``none``. The name is the image with every character
  outside ``[A-Za-z0-9._-]`` replaced by ``_``; the hash (8 hex digits of its SHA-256) keeps
  names that differ only there apart.
- :func:`task_argv`: the command that runs a task's ``argv`` inside the image: the job's
  directories bound at the same paths, the task's run directory at ``/run/determined`` (where
  Determined's official harness looks), the working directory kept, the task's environment
  passed in (apptainer passes the host's by default; podman ``--env-host``; enroot one
  ``--env NAME`` per variable; an image that is not a cached ``.sqsh`` is imported on the
  node first), and the devices of the slot type: ``--nv`` / ``--rocm``
  (apptainer), CDI ``nvidia.com/gpu=all`` / ``/dev/kfd`` + ``/dev/dri`` (podman), enroot's
  NVIDIA hook through ``NVIDIA_VISIBLE_DEVICES``. ``none`` returns ``argv`` unchanged.
- :func:`precache_steps`: per image, the file it is cached in and the command that builds it
  (``apptainer pull``, ``enroot import``, ``podman pull``), skipping images already cached.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from stalwart.hpc.layout import SlotType

__all__ = [
    "CONTAINER_RUN_TYPES",
    "RUN_DIR_IN_CONTAINER",
    "ContainerRunType",
    "PrecacheStep",
    "cached_image",
    "image_source",
    "precache_steps",
    "task_argv",
    "tool_of",
]

ContainerRunType = Literal["none", "apptainer", "singularity", "podman", "enroot"]
CONTAINER_RUN_TYPES: tuple[ContainerRunType, ...] = (
    "none",
    "apptainer",
    "singularity",
    "podman",
    "enroot",
)
RUN_DIR_IN_CONTAINER = "/run/determined"
"""Where the task's run directory (``DET_RUN_DIR``) is bound inside the container."""

_SCHEMES = ("docker://", "oras://", "library://", "shub://", "docker-archive:", "oci-archive:")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def tool_of(run_type: ContainerRunType) -> str | None:
    """The command that runs containers of ``run_type`` (None for ``none``)."""
    return None if run_type == "none" else run_type


def image_source(image: str) -> str:
    """Where the tool pulls ``image`` from (see the module docstring)."""
    if image.startswith(_SCHEMES) or image.endswith((".sif", ".sqsh")) or image.startswith("/"):
        return image
    return f"docker://{image}"


def _enroot_source(image: str) -> str:
    """enroot's spelling: ``docker://[REGISTRY#]IMAGE[:TAG]`` (``#`` after a registry host)."""
    image = image_source(image)
    if not image.startswith("docker://"):
        return image
    rest = image.removeprefix("docker://")
    first, sep, tail = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"docker://{first}#{tail}"
    return image


def cached_image(
    run_type: ContainerRunType, image: str, cache_dir: PurePosixPath | None
) -> PurePosixPath | None:
    """The image's file in ``cache_dir`` (see the module docstring)."""
    if cache_dir is None or run_type in ("none", "podman"):
        return None
    if image.endswith((".sif", ".sqsh")) or image.startswith("/"):
        return PurePosixPath(image)  # already a file: nothing to cache
    suffix = ".sqsh" if run_type == "enroot" else ".sif"
    digest = hashlib.sha256(image.encode()).hexdigest()[:8]
    name = _UNSAFE.sub("_", image.removeprefix("docker://"))
    return cache_dir / f"{name}-{digest}{suffix}"


def _container_name(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()[:12]
    return f"stalwart-{digest}"


def task_argv(
    run_type: ContainerRunType,
    argv: Sequence[str],
    *,
    image: str,
    slot_type: SlotType,
    workdir: str,
    run_dir: str,
    binds: Iterable[str] = (),
    env_names: Iterable[str] = (),
) -> list[str]:
    """``argv`` run inside ``image`` (a cached file or a source; see the module docstring).

    ``binds``: host directories bound at the same path (the job storage root, the
    checkpoint storage...); ``env_names``: the task's environment variables, passed to the
    container by name (their values stay out of the argv, where ``ps`` would show them)."""
    if run_type == "none":
        return list(argv)
    mounts = [b for b in dict.fromkeys(binds) if b]
    names = sorted(dict.fromkeys(env_names))
    if run_type in ("apptainer", "singularity"):
        out = [run_type, "exec"]
        if slot_type == "cuda":
            out.append("--nv")
        elif slot_type == "rocm":
            out.append("--rocm")
        pairs = [f"{m}:{m}" for m in mounts] + [f"{run_dir}:{RUN_DIR_IN_CONTAINER}"]
        out += ["--bind", ",".join(pairs), "--pwd", workdir, image_source(image), *argv]
        return out
    if run_type == "podman":
        out = ["podman", "run", "--rm", "--network=host", "--ipc=host", "--env-host"]
        out += ["--userns=keep-id", "--security-opt=label=disable"]
        if slot_type == "cuda":
            out += ["--device", "nvidia.com/gpu=all"]
        elif slot_type == "rocm":
            out += ["--device", "/dev/kfd", "--device", "/dev/dri"]
        for mount in mounts:
            out += ["--volume", f"{mount}:{mount}"]
        out += ["--volume", f"{run_dir}:{RUN_DIR_IN_CONTAINER}", "--workdir", workdir]
        return [*out, image, *argv]
    # enroot: a container is created from the squashfs file once per node (a second create of
    # the same name fails harmlessly), then started with the job's mounts and environment.
    name = _container_name(image)
    start = ["enroot", "start", "--rw"]
    for mount in mounts:
        start += ["--mount", f"{mount}:{mount}"]
    start += ["--mount", f"{run_dir}:{RUN_DIR_IN_CONTAINER}"]
    for var in names:
        start += ["--env", var]
    if slot_type == "cuda":
        start += ["--env", "NVIDIA_VISIBLE_DEVICES"]
    start += [name, "sh", "-c", 'cd "$0" && exec "$@"', workdir, *argv]
    prepare = ""
    squashfs = image
    if not image.endswith(".sqsh"):  # not cached: import it on this node first (slow)
        squashfs = f"/tmp/{name}.sqsh"
        fetch = shlex.join(["enroot", "import", "--output", squashfs, _enroot_source(image)])
        prepare = f"[ -e {squashfs} ] || {fetch} >&2; "
    create = shlex.join(["enroot", "create", "--name", name, squashfs])
    script = f'{prepare}{create} >/dev/null 2>&1 || true; exec "$@"'
    return ["sh", "-c", script, "sh", *start]


@dataclass(frozen=True)
class PrecacheStep:
    """One image to cache: where it goes (None: the tool's own storage) and the command."""

    image: str
    path: PurePosixPath | None
    argv: tuple[str, ...]


def precache_steps(
    run_type: ContainerRunType,
    images: Iterable[str],
    cache_dir: PurePosixPath | None,
    *,
    cached: Iterable[str] = (),
) -> list[PrecacheStep]:
    """What ``stalwart envs precache`` runs (see the module docstring); ``cached``: paths
    already there (skipped). Images in order, without duplicates; none for ``none``."""
    if run_type == "none":
        return []
    present = set(cached)
    steps = []
    for image in dict.fromkeys(images):
        if image.endswith((".sif", ".sqsh")) or image.startswith("/"):
            continue  # already a file on the shared filesystem
        path = cached_image(run_type, image, cache_dir)
        if path is not None and str(path) in present:
            continue
        if run_type in ("apptainer", "singularity"):
            if path is None:
                raise ValueError(f"{run_type} needs an image cache directory (image_cache_dir)")
            argv: tuple[str, ...] = (run_type, "pull", str(path), image_source(image))
        elif run_type == "enroot":
            if path is None:
                raise ValueError("enroot needs an image cache directory (image_cache_dir)")
            argv = ("enroot", "import", "--output", str(path), _enroot_source(image_source(image)))
        else:
            argv = ("podman", "pull", image)
        steps.append(PrecacheStep(image, path, argv))
    return steps
