"""The task-image manifest: models, loading, and look-ups.

``manifest.yaml`` (shipped in this package) is the single source of truth for task images: image
families, the framework(s) each holds, its image per device type, the environments tag, and the
default family per framework. :func:`load_manifest` reads and validates it; a malformed file raises
:class:`~stalwart.errors.ManifestError` listing every problem with its path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stalwart.environments.images import (
    DEVICE_TYPES,
    FRAMEWORKS,
    DeviceType,
    FrameworkName,
    is_repository,
    is_valid_tag,
    split_image_ref,
)
from stalwart.errors import ManifestError

__all__ = [
    "MANIFEST_PATH",
    "FrameworkDefault",
    "ImageFamily",
    "ImageRow",
    "Manifest",
    "load_manifest",
    "parse_manifest",
]

MANIFEST_PATH = Path(__file__).with_name("manifest.yaml")
"""The manifest shipped with the package."""

_FAMILY_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageFamily(_Model):
    """A set of images built together, one per device type they support."""

    description: str = Field(description="One line: what the images hold and what they are for.")
    frameworks: tuple[FrameworkName, ...] = Field(
        min_length=1, description="The deep-learning frameworks installed in every image."
    )
    base: str | None = Field(
        default=None,
        description="What the images are built FROM, e.g. nvcr.io/nvidia/pytorch:24.03-py3.",
    )
    variant_of: str | None = Field(
        default=None, description="The family this one is a variant of (e.g. an -hpc build)."
    )
    tag: str | None = Field(
        default=None,
        description=(
            "A tag pinned for this family. Unset: the images carry the manifest's "
            "environments_tag and move with `stalwart envs bump`."
        ),
    )
    images: dict[DeviceType, str] = Field(
        min_length=1,
        description="Device type -> image repository (no tag), e.g. determinedai/pytorch-ngc-dev.",
    )

    @field_validator("images")
    @classmethod
    def _repositories_have_no_tag(cls, images: dict[DeviceType, str]) -> dict[DeviceType, str]:
        for device, repo in images.items():
            if not is_repository(repo):
                raise ValueError(
                    f"{device}: {repo!r} is not an image repository without a tag "
                    "(put a pinned tag in the family's `tag`)"
                )
        return images

    @field_validator("tag")
    @classmethod
    def _tag_grammar(cls, tag: str | None) -> str | None:
        if tag is not None and not is_valid_tag(tag):
            raise ValueError(f"{tag!r} is not a valid Docker tag")
        return tag

    @property
    def follows_environments_tag(self) -> bool:
        """True when the images carry the environments tag (no pinned ``tag``)."""
        return self.tag is None

    @property
    def ngc_version(self) -> str | None:
        """The NVIDIA NGC container version the family is built on (``24.03-py3``), if any."""
        if self.base and self.base.startswith("nvcr.io/nvidia/"):
            return split_image_ref(self.base)[1]
        return None


class FrameworkDefault(_Model):
    """The default family of one framework, with per-device fallbacks."""

    family: str = Field(description="The family a task with this framework gets by default.")
    fallback: dict[DeviceType, str] = Field(
        default_factory=dict,
        description="Device type -> family to use where `family` has no image for that device.",
    )


class ImageRow(_Model):
    """One (family, device) -> image entry, as listed by ``stalwart envs list``."""

    family: str = Field(description="The family name.")
    frameworks: tuple[FrameworkName, ...] = Field(description="Frameworks the image holds.")
    device: DeviceType = Field(description="The device type the image is for.")
    image: str = Field(description="The full image reference, repository:tag.")
    follows_environments_tag: bool = Field(description="Whether `envs bump` moves this image.")


class Manifest(_Model):
    """The whole manifest. Validation checks every cross-reference (defaults, fallbacks, variants).

    Invariants after validation: every framework in :data:`FRAMEWORKS` has a default that yields an
    image holding that framework on every device type; no repository of a family that follows the
    environments tag belongs to a second family.
    """

    schema_version: Literal[1] = Field(description="Manifest format version.")
    environments_tag: str = Field(
        description="Tag of every image whose family has no pinned tag (an environments commit)."
    )
    defaults: dict[FrameworkName, FrameworkDefault] = Field(
        description="Framework -> its default family (and fallbacks)."
    )
    families: dict[str, ImageFamily] = Field(min_length=1, description="Family name -> family.")

    @field_validator("environments_tag")
    @classmethod
    def _env_tag_grammar(cls, tag: str) -> str:
        if not is_valid_tag(tag):
            raise ValueError(f"{tag!r} is not a valid Docker tag")
        return tag

    @model_validator(mode="after")
    def _cross_references(self) -> Manifest:
        problems: list[str] = []
        owner: dict[str, str] = {}
        for name, fam in self.families.items():
            if not _FAMILY_NAME.fullmatch(name):
                problems.append(f"families.{name}: name must be lower-case letters, digits, '-'")
            if fam.variant_of is not None and fam.variant_of not in self.families:
                problems.append(f"families.{name}.variant_of: unknown family {fam.variant_of!r}")
            for repo in dict.fromkeys(fam.images.values()):
                if fam.follows_environments_tag and owner.setdefault(repo, name) != name:
                    problems.append(f"families.{name}: {repo} also belongs to {owner[repo]}")
        for framework in FRAMEWORKS:
            default = self.defaults.get(framework)
            if default is None:
                problems.append(f"defaults.{framework}: missing")
                continue
            for device in DEVICE_TYPES:
                fam_name = default.fallback.get(device, default.family)
                where = f"defaults.{framework}" + (
                    f".fallback.{device}" if device in default.fallback else ".family"
                )
                target = self.families.get(fam_name)
                if target is None:
                    problems.append(f"{where}: unknown family {fam_name!r}")
                elif framework not in target.frameworks:
                    problems.append(f"{where}: {fam_name} does not hold {framework}")
                elif device not in target.images:
                    problems.append(f"{where}: {fam_name} has no {device} image (add a fallback)")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def image_ref(self, family: str, device: DeviceType) -> str | None:
        """The full ``repo:tag`` of ``family``'s image for ``device``; None if it has none."""
        fam = self.families[family]
        repo = fam.images.get(device)
        if repo is None:
            return None
        return f"{repo}:{fam.tag or self.environments_tag}"

    def default_image(self, framework: FrameworkName, device: DeviceType) -> tuple[str, str]:
        """``(family, image)`` a task of ``framework`` on ``device`` gets when nothing is set."""
        default = self.defaults[framework]
        family = default.fallback.get(device, default.family)
        image = self.image_ref(family, device)
        assert image is not None, "guaranteed by validation"
        return family, image

    def family_of(self, image: str) -> str | None:
        """The family an image reference belongs to, or None for an unknown image.

        Images of families that follow the environments tag match by repository, whatever their
        tag (an older tag is still that family); pinned families match only their exact reference.
        """
        repo, tag = split_image_ref(image)
        for name, fam in self.families.items():
            if repo in fam.images.values() and (fam.follows_environments_tag or tag == fam.tag):
                return name
        return None

    def tracked_repositories(self) -> dict[str, str]:
        """Repository -> family, for every family that follows the environments tag."""
        return {
            repo: name
            for name, fam in self.families.items()
            if fam.follows_environments_tag
            for repo in fam.images.values()
        }

    def rows(self) -> Iterator[ImageRow]:
        """Every (family, device) image, in manifest order and device order."""
        for name, fam in self.families.items():
            for device in DEVICE_TYPES:
                image = self.image_ref(name, device)
                if image is not None:
                    yield ImageRow(
                        family=name,
                        frameworks=fam.frameworks,
                        device=device,
                        image=image,
                        follows_environments_tag=fam.follows_environments_tag,
                    )


def parse_manifest(text: str, source: str) -> Manifest:
    """Validate manifest YAML ``text``; ``source`` names it in errors (ManifestError)."""
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(source, [f"{where}not valid YAML: {problem}"]) from exc
    if not isinstance(data, dict):
        raise ManifestError(source, ["the manifest must be a YAML mapping"])
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(part) for part in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            problems += [f"{loc}: {line}" if loc else line for line in msg.splitlines()]
        raise ManifestError(source, problems) from exc


@functools.cache
def _load_default() -> Manifest:
    return parse_manifest(MANIFEST_PATH.read_text(encoding="utf-8"), str(MANIFEST_PATH))


def load_manifest(path: Path | None = None) -> Manifest:
    """Load and validate a manifest; the packaged one (cached) when ``path`` is None.

    Raises ManifestError when the file is missing, is not YAML, or does not validate.
    """
    if path is None:
        return _load_default()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(str(path), [f"cannot read: {exc.strerror or exc}"]) from exc
    return parse_manifest(text, str(path))
