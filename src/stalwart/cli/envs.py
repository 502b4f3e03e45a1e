"""``stalwart envs``: task images (list, resolve) and bumpenvs (table, bump, check).

Errors are raised as :class:`~stalwart.errors.StalwartError`; ``stalwart.cli.main`` prints them
as one line and exits 1 (``envs check`` with stale references and ``envs resolve`` with a
framework conflict both end that way).
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from stalwart.cli.precache import precache
from stalwart.config import DefaultsLayers, load_experiment_config
from stalwart.config.loader import read_yaml
from stalwart.environments import (
    LAYER_SOURCES,
    SOURCE_EXPERIMENT,
    SOURCE_TEMPLATE,
    TABLE_PATH,
    DeviceType,
    Framework,
    ImageLayer,
    Manifest,
    bump,
    check,
    default_root,
    load_manifest,
    render_table,
    repository_manifest,
    resolve_image,
)
from stalwart.errors import StaleImageReferencesError

__all__ = ["app"]

app = typer.Typer(
    name="envs",
    help="Task environments: default images, image resolution, and bumpenvs.",
    no_args_is_help=True,
)


class _Device(StrEnum):
    cpu = "cpu"
    cuda = "cuda"
    rocm = "rocm"


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _root(root: Path | None) -> Path:
    return root.resolve() if root is not None else default_root()


def _manifest(root: Path | None) -> Manifest:
    """The manifest of ``root`` (default: this checkout) if it has one, else the packaged one."""
    path = repository_manifest(_root(root))
    return load_manifest(path) if path is not None else load_manifest()


def _raw_image(data: Any) -> Any:
    environment = data.get("environment") if isinstance(data, dict) else None
    return environment.get("image") if isinstance(environment, dict) else None


def _experiment_layers(
    path: Path, template: Path | None
) -> tuple[list[ImageLayer], Framework, DeviceType]:
    """The image layers of an experiment (and template), its framework and default device.

    The config is validated first (an invalid config is a ConfigError listing every problem);
    the layers keep the raw ``environment.image`` of each file so the source can be named.
    """
    doc = read_yaml(path)
    tpl = read_yaml(template) if template is not None else None
    defaults = DefaultsLayers(template=tpl.data) if tpl is not None and tpl.data else None
    config = load_experiment_config(doc, defaults).config
    layers = [ImageLayer(SOURCE_EXPERIMENT, _raw_image(doc.data))]
    if tpl is not None:
        layers.append(ImageLayer(SOURCE_TEMPLATE, _raw_image(tpl.data)))
    device: DeviceType = "cuda" if config.resources.slots_per_trial > 0 else "cpu"
    return layers, config.environment.framework, device


@app.command("list")
def list_images(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List every image of the manifest: family, frameworks, device, image."""
    manifest = load_manifest()
    rows = list(manifest.rows())
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return
    table = Table(title=f"Task images (environments tag {manifest.environments_tag})")
    table.add_column("family", no_wrap=True)
    table.add_column("frameworks")
    table.add_column("device", no_wrap=True)
    table.add_column("image", overflow="fold", min_width=40)
    table.add_column("tag", no_wrap=True)
    for r in rows:
        tag = "env tag" if r.follows_environments_tag else "pinned"
        table.add_row(r.family, ", ".join(r.frameworks), r.device, r.image, tag)
    out = Console(highlight=False)
    if not out.is_terminal:  # piped: never fold image names
        out = Console(highlight=False, width=200)
    out.print(table)


@app.command()
def resolve(
    config: Annotated[Path, typer.Argument(help="Experiment config (YAML).")],
    context: Annotated[
        Path | None,
        typer.Option("--context", "-c", help="Model directory, scanned for framework imports."),
    ] = None,
    device: Annotated[
        _Device | None,
        typer.Option(help="Device type (default: cuda if slots_per_trial > 0, else cpu)."),
    ] = None,
    template: Annotated[
        Path | None,
        typer.Option("--template", "-t", help="A config template merged under CONFIG."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print the image a task of CONFIG would get, where it comes from, and any notices."""
    layers, framework, default_device = _experiment_layers(config, template)
    chosen: DeviceType = device.value if device is not None else default_device
    result = resolve_image(chosen, layers, framework=framework, model_dir=context)
    notices = list(result.notices)
    if context is None and framework == "auto" and result.source not in LAYER_SOURCES:
        notices.append("no --context given: framework detection skipped (PyTorch assumed)")
    if as_json:
        payload = result.model_dump(mode="json") | {"notices": notices}
        typer.echo(json.dumps(payload, indent=2))
        return
    out = _console()
    out.print(f"image:  {result.image}", markup=False)
    out.print(f"device: {result.device}", markup=False)
    out.print(f"source: {result.source}", markup=False)
    for notice in notices:
        out.print(f"notice: {notice}", markup=False)


@app.command()
def table(
    write: Annotated[
        bool, typer.Option("--write", help=f"Write {TABLE_PATH} instead of printing.")
    ] = False,
    root: Annotated[Path | None, typer.Option(help="Repository root (default: git top).")] = None,
) -> None:
    """Print (or write) the generated default-images page."""
    rendered = render_table(_manifest(root))
    if not write:
        typer.echo(rendered, nl=False)
        return
    target = _root(root) / TABLE_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(rendered, encoding="utf-8")
    _console().print(f"wrote {target}", markup=False)


@app.command("bump")
def bump_tag(
    new_tag: Annotated[str, typer.Argument(help="The new environments tag.")],
    root: Annotated[Path | None, typer.Option(help="Repository root (default: git top).")] = None,
) -> None:
    """Move the environments tag to NEW_TAG and every reference in the repository with it."""
    report = bump(_root(root), new_tag)
    out = _console()
    for change in report.files:
        if change.regenerated:
            out.print(f"{change.path}: regenerated", markup=False)
        for line in change.lines:
            out.print(f"{change.path}:{line.line}: {line.old} -> {line.new}", markup=False)
    files = len(report.files)
    out.print(
        f"environments tag {report.old_tag} -> {report.new_tag}: {report.count} change(s) "
        f"in {files} file(s)",
        markup=False,
    )


@app.command("check")
def check_refs(
    root: Annotated[Path | None, typer.Option(help="Repository root (default: git top).")] = None,
) -> None:
    """Fail (exit 1) if any image reference or generated table disagrees with the manifest."""
    where = _root(root)
    stale = check(where)
    out = _console()
    for ref in stale:
        out.print(str(ref), markup=False)
    if stale:
        raise StaleImageReferencesError(
            f"{len(stale)} stale image reference(s) under {where}",
            hint="run `stalwart envs bump <tag>` or `stalwart envs table --write`; add "
            "`envs-check: ignore` to a line that names an old tag on purpose",
        )
    tag = _manifest(where).environments_tag
    out.print(f"envs check: OK (every reference matches environments tag {tag})", markup=False)


app.command("precache")(precache)
