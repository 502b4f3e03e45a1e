"""``stalwart checkpoint``: describe a checkpoint and download its files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_mapping, fmt_time, out, print_json, transfer_progress

__all__ = ["app"]

app = typer.Typer(help="Describe and download checkpoints.", no_args_is_help=True)

_UUID = typer.Argument(help="The checkpoint's UUID.")


@app.command("describe")
def describe(
    uuid: Annotated[str, _UUID],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show a checkpoint: where it came from, its metrics and its files."""
    ckpt = client().get_checkpoint(uuid)
    if as_json:
        print_json(ckpt.data)
        return
    training = ckpt.data.training
    validation = training.validation_metrics.avg_metrics if training.validation_metrics else {}
    lines = [
        f"Checkpoint {ckpt.uuid}",
        f"State: {ckpt.state}",
        f"Experiment: {training.experiment_id or ''}  Trial: {training.trial_id or ''}",
        f"Batches: {ckpt.steps_completed if ckpt.steps_completed is not None else ''}",
        f"Reported: {fmt_time(ckpt.data.report_time)}",
        f"Hyperparameters: {fmt_mapping(training.hparams)}",
        f"Validation metrics: {fmt_mapping(validation)}",
        f"Metadata: {fmt_mapping(ckpt.metadata)}",
        f"Files ({ckpt.size} bytes):",
    ]
    lines += [f"  {path}  {size}" for path, size in ckpt.resources.items()]
    console = out()
    for line in lines:
        console.print(line, markup=False)


@app.command("download")
def download(
    uuid: Annotated[str, _UUID],
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir", "-o", help="Where to put the files (default: checkpoints/UUID)."
        ),
    ] = None,
) -> None:
    """Copy a checkpoint's files from its storage to this machine."""
    ckpt = client().get_checkpoint(uuid)
    with transfer_progress("Downloading") as progress:
        path = ckpt.download(output_dir, progress=progress)
    out().print(f"Local checkpoint path: {path}", markup=False)
