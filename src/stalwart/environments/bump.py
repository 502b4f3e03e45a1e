"""bumpenvs, done with one source of truth: move the environments tag, and check nothing is stale.

- :func:`bump` rewrites the ``environments_tag:`` line of the repository's manifest
  (``src/stalwart/environments/manifest.yaml``; comments and layout are kept), gives every
  reference to an image that follows the environments tag the new tag, in every text file of the
  repository, and re-renders the generated table (never string-replaced).
- :func:`check` lists every reference whose tag disagrees with the manifest, and the generated
  table when it differs from :func:`~.table.render_table`.

Both skip lines containing :data:`~.refs.IGNORE_MARKER`. Neither reads environment variables.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from stalwart.environments.images import TAG_PATTERN, is_valid_tag
from stalwart.environments.manifest import Manifest, load_manifest, parse_manifest
from stalwart.environments.refs import (
    find_references,
    read_text,
    reference_pattern,
    repository_files,
    rewrite_references,
)
from stalwart.environments.table import TABLE_PATH, render_table
from stalwart.errors import EnvsBumpError

__all__ = [
    "MANIFEST_IN_REPO",
    "BumpReport",
    "FileChange",
    "LineChange",
    "StaleReference",
    "bump",
    "check",
    "default_root",
    "repository_manifest",
    "validate_tag",
]

MANIFEST_IN_REPO = PurePosixPath("src/stalwart/environments/manifest.yaml")
"""The manifest's path in a Stalwart checkout (the file the package ships)."""

_TAG_LINE = re.compile(
    r"^(?P<key>environments_tag:[ \t]*)(?P<q>[\"']?)(?P<tag>[^\"'\s#]+)(?P=q)", re.M
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LineChange(_Model):
    """One rewritten reference."""

    line: int = Field(description="1-based line number.")
    old: str = Field(description="The text before.")
    new: str = Field(description="The text after.")


class FileChange(_Model):
    """Everything :func:`bump` changed in one file."""

    path: str = Field(description="POSIX path relative to the repository root.")
    lines: list[LineChange] = Field(description="Rewritten references (empty if regenerated).")
    regenerated: bool = Field(default=False, description="True for a re-rendered generated file.")


class BumpReport(_Model):
    """What :func:`bump` did."""

    old_tag: str = Field(description="The manifest's environments tag before.")
    new_tag: str = Field(description="The environments tag now.")
    manifest: str = Field(description="The manifest file that was rewritten (relative path).")
    files: list[FileChange] = Field(description="Changed files, sorted by path.")

    @property
    def count(self) -> int:
        """Number of rewritten lines/references, counting a regenerated file as one."""
        return sum(len(f.lines) or int(f.regenerated) for f in self.files)


class StaleReference(_Model):
    """One place that disagrees with the manifest."""

    path: str = Field(description="POSIX path relative to the repository root.")
    line: int = Field(description="1-based line number.")
    found: str = Field(description="The stale image reference, or what is wrong with the file.")
    expected: str | None = Field(
        default=None, description="The reference the manifest gives (None for generated files)."
    )

    def __str__(self) -> str:
        if self.expected is None:
            return f"{self.path}:{self.line}: {self.found}"
        return f"{self.path}:{self.line}: {self.found} (manifest says {self.expected})"


def validate_tag(tag: str) -> str:
    """Return ``tag`` if it is a valid tag (see :func:`~.manifest.is_valid_tag`), else raise."""
    if not is_valid_tag(tag):
        raise EnvsBumpError(
            f"{tag!r} is not a valid image tag",
            hint=f"a tag matches {TAG_PATTERN.pattern} and does not end in '.' or '-'",
        )
    return tag


def default_root(cwd: Path | None = None) -> Path:
    """The git top-level of ``cwd`` (default: the current directory), else ``cwd`` itself."""
    here = cwd if cwd is not None else Path.cwd()
    try:
        proc = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return here
    top = proc.stdout.strip()
    return Path(top) if proc.returncode == 0 and top else here


def repository_manifest(root: Path) -> Path | None:
    """``root``'s own copy of the manifest, if ``root`` is a Stalwart checkout."""
    path = root / MANIFEST_IN_REPO
    return path if path.is_file() else None


def _manifest_for(root: Path) -> Manifest:
    path = repository_manifest(root)
    return load_manifest(path) if path is not None else load_manifest()


def _first_difference(actual: str, expected: str) -> int:
    """1-based number of the first line where the two texts differ."""
    ours, theirs = actual.split("\n"), expected.split("\n")
    for number, (a, b) in enumerate(zip(ours, theirs, strict=False), 1):
        if a != b:
            return number
    return min(len(ours), len(theirs)) + 1


def check(root: Path) -> list[StaleReference]:
    """Every stale reference under ``root``, sorted by path and line; empty when all agree.

    Uses ``root``'s manifest when it has one, else the packaged manifest. The generated table is
    compared whole (and reported missing in a Stalwart checkout that lacks it).
    """
    manifest = _manifest_for(root)
    pattern = reference_pattern(manifest.tracked_repositories())
    stale: list[StaleReference] = []
    for rel in repository_files(root):
        if rel == TABLE_PATH.as_posix():
            continue
        text = read_text(root / rel)
        if text is None:
            continue
        for ref in find_references(text, pattern):
            if ref.tag != manifest.environments_tag:
                expected = f"{ref.repository}:{manifest.environments_tag}"
                stale.append(
                    StaleReference(path=rel, line=ref.line, found=ref.image, expected=expected)
                )
    table = root / TABLE_PATH
    rendered = render_table(manifest)
    regenerate = "run `stalwart envs table --write`"
    if table.is_file():
        current = read_text(table) or ""
        if current != rendered:
            line = _first_difference(current, rendered)
            found = f"generated table differs from the manifest; {regenerate}"
            stale.append(StaleReference(path=TABLE_PATH.as_posix(), line=line, found=found))
    elif repository_manifest(root) is not None:
        found = f"generated table is missing; {regenerate}"
        stale.append(StaleReference(path=TABLE_PATH.as_posix(), line=1, found=found))
    return sorted(stale, key=lambda s: (s.path, s.line))


def _retag_manifest(text: str, new_tag: str, source: str) -> tuple[str, LineChange]:
    match = _TAG_LINE.search(text)
    if match is None:
        raise EnvsBumpError(f"{source}: no `environments_tag:` line to rewrite")
    start, end = match.span("tag")
    new_text = text[:start] + new_tag + text[end:]
    line = text.count("\n", 0, start) + 1
    change = LineChange(
        line=line, old=f"environments_tag: {match['tag']}", new=f"environments_tag: {new_tag}"
    )
    return new_text, change


def bump(root: Path, new_tag: str) -> BumpReport:
    """Move the environments tag to ``new_tag`` and every reference under ``root`` with it.

    ``root`` must be a Stalwart checkout (it has ``src/stalwart/environments/manifest.yaml``);
    raises EnvsBumpError otherwise or for an invalid tag, ManifestError if the rewritten manifest
    does not validate. Nothing is written unless every new text was computed. Idempotent.
    """
    validate_tag(new_tag)
    manifest_path = repository_manifest(root)
    if manifest_path is None:
        raise EnvsBumpError(
            f"{root} has no {MANIFEST_IN_REPO}",
            hint="run `stalwart envs bump` in a Stalwart checkout, or pass --root",
        )
    manifest_rel = MANIFEST_IN_REPO.as_posix()
    original = manifest_path.read_text(encoding="utf-8")
    old_tag = parse_manifest(original, manifest_rel).environments_tag
    retagged, tag_change = _retag_manifest(original, new_tag, manifest_rel)
    manifest = parse_manifest(retagged, manifest_rel)
    pattern = reference_pattern(manifest.tracked_repositories())

    writes: dict[str, str] = {}
    files: list[FileChange] = []
    others = [r for r in repository_files(root) if r not in (manifest_rel, TABLE_PATH.as_posix())]
    for rel in [manifest_rel, *others]:
        text = retagged if rel == manifest_rel else read_text(root / rel)
        if text is None:
            continue
        new_text, changes = rewrite_references(text, pattern, new_tag)
        lines = [LineChange(line=n, old=old, new=new) for n, old, new in changes]
        if rel == manifest_rel and old_tag != new_tag:
            lines = sorted([tag_change, *lines], key=lambda c: c.line)
        if new_text != (original if rel == manifest_rel else text):
            writes[rel] = new_text
            files.append(FileChange(path=rel, lines=lines))
    rendered = render_table(manifest)
    table = root / TABLE_PATH
    if not table.is_file() or read_text(table) != rendered:
        writes[TABLE_PATH.as_posix()] = rendered
        files.append(FileChange(path=TABLE_PATH.as_posix(), lines=[], regenerated=True))

    for rel, text in writes.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    return BumpReport(
        old_tag=old_tag,
        new_tag=new_tag,
        manifest=manifest_rel,
        files=sorted(files, key=lambda f: f.path),
    )
