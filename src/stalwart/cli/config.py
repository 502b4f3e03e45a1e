"""``stalwart config``: check experiment configs and show them fully defaulted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console

from stalwart.config import load_experiment_config
from stalwart.config.load import DefaultsLayers
from stalwart.config.loader import read_yaml
from stalwart.errors import ConfigError

__all__ = ["app"]

app = typer.Typer(help="Check and show experiment configs.", no_args_is_help=True)

_TEMPLATE = typer.Option(
    "--template", "-t", help="A config template (YAML) merged under the experiment config."
)


def _defaults(template: Path | None) -> DefaultsLayers | None:
    if template is None:
        return None
    doc = read_yaml(template)
    if not isinstance(doc.data, dict):
        raise ConfigError(str(template), ["<config>: a template must be a mapping"])
    return DefaultsLayers(template=doc.data)


@app.command("check")
def check(
    files: Annotated[list[Path], typer.Argument(help="Experiment config files (YAML).")],
    template: Annotated[Path | None, _TEMPLATE] = None,
) -> None:
    """Validate configs: exit 0 if every file is valid, 1 otherwise (one problem per line)."""
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    defaults = _defaults(template)
    failed = 0
    for path in files:
        try:
            loaded = load_experiment_config(path, defaults)
        except ConfigError as exc:
            failed += 1
            for problem in exc.problems:
                err.print(f"{exc.source}: {problem}", markup=False)
            continue
        for warning in loaded.warnings:
            err.print(f"{path}: warning: {warning}", markup=False)
        out.print(f"{path}: ok", markup=False)
    if failed:
        err.print(f"invalid: {failed} of {len(files)} file(s)", markup=False)
        raise typer.Exit(1)


@app.command("show")
def show(
    file: Annotated[Path, typer.Argument(help="An experiment config file (YAML).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of YAML.")] = False,
    template: Annotated[Path | None, _TEMPLATE] = None,
) -> None:
    """Print the fully defaulted config that the experiment's tasks receive."""
    loaded = load_experiment_config(file, _defaults(template))
    data = loaded.config.to_dict()
    for warning in loaded.warnings:
        Console(stderr=True, highlight=False).print(f"warning: {warning}", markup=False)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip())
