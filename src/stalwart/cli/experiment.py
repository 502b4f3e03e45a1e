"""``stalwart experiment`` (alias ``e``): create, list, inspect and control experiments.

``continue ID [--config K=V] [--config-file F]`` trains a finished single-trial experiment on
from its latest checkpoint, with the override merged over its config.

``create CONFIG [CONTEXT]`` uploads the config and the context directory (``.detignore`` and
``.stalwartignore`` honoured) and prints ``Created experiment N``; ``-f`` then streams the first
trial's logs until it ends (exit 1 if that trial ended in ERROR). ``wait ID`` exits 0 only when
the experiment COMPLETED.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from stalwart.cli.common import (
    client,
    err,
    fmt_float,
    fmt_mapping,
    fmt_time,
    out,
    print_json,
    state_text,
    table,
    transfer_progress,
)
from stalwart.cli.trial import print_logs, print_workloads, workload_rows
from stalwart.client import EXPERIMENT_TERMINAL_STATES, Checkpoint, Experiment, Trial
from stalwart.client.errors import ExperimentNotCompletedError, TrialFailedError
from stalwart.config.loader import read_yaml
from stalwart.errors import ConfigError, FailedPreconditionError, InvalidArgumentError

__all__ = ["app", "apply_overrides"]

app = typer.Typer(help="Create, inspect and control experiments.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")
_ID = typer.Argument(help="The experiment.")


def apply_overrides(config: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set ``a.b.c=value`` overrides (values parsed as YAML) in a copy of ``config``."""
    result: dict[str, Any] = yaml.safe_load(yaml.safe_dump(config))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(
                f"--config {item!r} is not KEY=VALUE", hint="e.g. --config searcher.max_trials=4"
            )
        node = result
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None
    return result


def _first_trial(exp: Experiment, *, wait: bool) -> Trial | None:
    """The experiment's lowest-id trial; with ``wait``, polls until one exists (or the
    experiment ended without any)."""
    while True:
        trials = exp.trials()
        if trials or not wait:
            return trials[0] if trials else None
        if exp.reload().state in EXPERIMENT_TERMINAL_STATES:
            return None
        time.sleep(0.2)


def _follow_first_trial(exp: Experiment) -> None:
    err().print("Waiting for the first trial to begin...", markup=False)
    trial = _first_trial(exp, wait=True)
    if trial is None:
        raise ExperimentNotCompletedError(
            exp.id,
            exp.state,
            hint=f"it started no trial; see `stalwart experiment describe {exp.id}`",
        )
    print_logs(trial.logs(follow=True))
    err().print(
        f"Trial log stream ended. To reopen it: stalwart trial logs -f {trial.id}", markup=False
    )
    if trial.reload().state == "ERROR":
        raise TrialFailedError(
            f"trial {trial.id} of experiment {exp.id} ended in ERROR",
            hint=f"read its logs with `stalwart trial logs {trial.id}`",
        )


@app.command("create")
def create(
    config: Annotated[Path, typer.Argument(help="The experiment config (YAML).")],
    context: Annotated[
        Path | None, typer.Argument(help="The model definition directory (your code).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Stream the first trial's logs.")
    ] = False,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--config", help="KEY=VALUE set in the config (repeatable; a.b=c nests)."),
    ] = None,
    template: Annotated[str | None, typer.Option("--template", help="A config template.")] = None,
    includes: Annotated[
        list[Path] | None,
        typer.Option("--include", "-i", help="Also upload this file or directory."),
    ] = None,
    project_id: Annotated[
        int | None, typer.Option("--project-id", "--project_id", help="Create it in this project.")
    ] = None,
) -> None:
    """Create an experiment and start it (unless --paused)."""
    api = client()
    source: Path | dict[str, Any] = config
    if overrides:
        doc = read_yaml(config)
        if not isinstance(doc.data, dict):
            raise ConfigError(str(config), ["<config>: must be a mapping of experiment settings"])
        source = apply_overrides(doc.data, overrides)
    with transfer_progress("Uploading") as progress:
        exp = api.create_experiment(
            source,
            context,
            activate=not paused,
            includes=includes or (),
            template=template,
            progress=progress,
            project_id=project_id,
        )
    out().print(f"Created experiment {exp.id}", markup=False)
    for notice in exp.notices:
        out().print(f"note: {notice}", markup=False)
    if follow and not paused:
        _follow_first_trial(exp)


@app.command("continue")
def continue_experiment(
    experiment_id: Annotated[int, _ID],
    config_file: Annotated[
        Path | None,
        typer.Option("--config-file", help="YAML merged over the experiment's config."),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--config", help="KEY=VALUE merged over the config (repeatable; a.b=c nests)."
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Stream the continued trial's logs.")
    ] = False,
) -> None:
    """Continue a finished single-trial experiment from its latest checkpoint (e.g. with
    --config searcher.max_length.batches=2000)."""
    override: dict[str, Any] = {}
    if config_file is not None:
        doc = read_yaml(config_file)
        if doc.data is not None and not isinstance(doc.data, dict):
            raise ConfigError(str(config_file), ["<config>: must be a mapping of settings"])
        override = dict(doc.data or {})
    if overrides:
        override = apply_overrides(override, overrides)
    exp = client().continue_experiment(experiment_id, override or None)
    out().print(f"Continued experiment {exp.id}", markup=False)
    if follow:
        _follow_first_trial(exp)


def _experiments_table(experiments: list[Experiment]) -> None:
    grid = table("ID", "Name", "Owner", "State", "Progress", "Trials", "Started", "Ended")
    for exp in experiments:
        data = exp.data
        progress = "" if data.progress is None else f"{data.progress:.0%}"
        name = data.name + (" (archived)" if data.archived else "")
        grid.add_row(
            str(data.id),
            name,
            data.username,
            state_text(data.state),
            progress,
            str(data.num_trials),
            fmt_time(data.start_time, compact=True),
            fmt_time(data.end_time, compact=True),
        )
    out().print(grid)


@app.command("list")
def list_experiments(
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Everyone's, archived ones included.")
    ] = False,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List your experiments (--all: everyone's, archived included)."""
    api = client()
    if show_all:
        found = api.list_experiments(users=None, archived=None)
    else:
        found = api.list_experiments(users=[api.user], archived=False)
    if as_json:
        print_json([e.data for e in found])
    else:
        _experiments_table(found)


def _trials_table(trials: list[Trial], metric: str | None) -> None:
    best = f"Best {metric or 'metric'}"
    grid = table("Trial", "State", "Hyperparameters", "Batches", best, "Restarts")
    for trial in trials:
        data = trial.data
        grid.add_row(
            str(data.id),
            state_text(data.state),
            fmt_mapping(data.hparams),
            str(data.total_batches_processed),
            fmt_float(data.searcher_metric_value),
            str(data.restarts),
        )
    out().print(grid)


@app.command("describe")
def describe(
    experiment_id: Annotated[int, _ID],
    as_json: Annotated[bool, _JSON] = False,
    metrics: Annotated[
        bool, typer.Option("--metrics", help="Also show each trial's metrics by batch.")
    ] = False,
) -> None:
    """Show an experiment and its trials."""
    exp = client().get_experiment(experiment_id)
    trials = exp.trials()
    if as_json:
        data: dict[str, Any] = {"experiment": exp.data, "trials": [t.data for t in trials]}
        if metrics:
            data["workloads"] = {str(t.id): workload_rows(t.workloads()) for t in trials}
        print_json(data)
        return
    info = exp.data
    console = out()
    console.print(f"[bold]Experiment {info.id}[/bold]: {info.name}", highlight=False)
    progress = "" if info.progress is None else f" ({info.progress:.0%})"
    console.print("State: ", state_text(info.state), progress, sep="")
    lines = [
        f"Owner: {info.username}",
        f"Searcher: {info.searcher_type}, metric {info.searcher_metric or '-'}",
        f"Resource pool: {info.resource_pool}",
        f"Started: {fmt_time(info.start_time)}",
    ]
    if info.end_time:
        lines.append(f"Ended: {fmt_time(info.end_time)}")
    if info.best_trial_id is not None:
        best = fmt_float(info.best_trial_searcher_metric)
        lines.append(f"Best trial: {info.best_trial_id} ({info.searcher_metric} {best})")
    lines.append(f"Checkpoints: {info.checkpoint_count}")
    for line in lines:
        console.print(line, markup=False)
    console.print()
    _trials_table(trials, info.searcher_metric)
    if metrics:
        for trial in trials:
            console.print()
            print_workloads(trial)


def _action(verb: str, done: str) -> None:
    def command(experiment_id: Annotated[int, _ID]) -> None:
        getattr(client().get_experiment(experiment_id), verb)()
        out().print(f"{done} experiment {experiment_id}.", markup=False)

    command.__doc__ = {
        "pause": "Pause an experiment (trials checkpoint and stop).",
        "activate": "Activate a paused experiment.",
        "cancel": "Cancel an experiment (trials checkpoint and exit).",
        "kill": "Kill an experiment (trials stop now).",
        "archive": "Archive a terminal experiment (hidden from `list`).",
        "unarchive": "Unarchive an experiment.",
    }[verb]
    app.command(verb)(command)


for _verb, _done in (
    ("pause", "Paused"),
    ("activate", "Activated"),
    ("cancel", "Canceled"),
    ("kill", "Killed"),
    ("archive", "Archived"),
    ("unarchive", "Unarchived"),
):
    _action(_verb, _done)


@app.command("delete")
def delete(
    experiment_id: Annotated[int, _ID],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a terminal experiment and everything recorded about it."""
    exp = client().get_experiment(experiment_id)
    if not yes:
        typer.confirm(
            f"Delete experiment {exp.id} ({exp.name}, {exp.state}) and all its records?",
            abort=True,
        )
    exp.delete()
    out().print(f"Deleted experiment {experiment_id}.", markup=False)


@app.command("move")
def move(
    experiment_id: Annotated[int, _ID],
    workspace: Annotated[str, typer.Argument(help="The destination workspace.")],
    project: Annotated[str, typer.Argument(help="The destination project.")],
) -> None:
    """Move an experiment to another project."""
    client().get_experiment(experiment_id).move_to_project(workspace, project)
    out().print(f'Moved experiment {experiment_id} to project "{project}".', markup=False)


@app.command("logs")
def logs(
    experiment_id: Annotated[int, _ID],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until the trial ends.")
    ] = False,
) -> None:
    """Print the logs of the experiment's first trial."""
    exp = client().get_experiment(experiment_id)
    trial = _first_trial(exp, wait=follow)
    if trial is None:
        raise FailedPreconditionError(
            f"experiment {experiment_id} has no trials yet",
            hint=f"follow it with `stalwart experiment logs -f {experiment_id}`",
        )
    print_logs(trial.logs(follow=follow))


@app.command("list-trials")
def list_trials(
    experiment_id: Annotated[int, _ID], as_json: Annotated[bool, _JSON] = False
) -> None:
    """List an experiment's trials."""
    exp = client().get_experiment(experiment_id)
    trials = exp.trials()
    if as_json:
        print_json([t.data for t in trials])
    else:
        _trials_table(trials, exp.data.searcher_metric)


app.command("lt", hidden=True)(list_trials)


def _size(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)  # pragma: no cover


def checkpoints_table(checkpoints: list[Checkpoint], metric: str | None) -> None:
    """A table of checkpoints (also used by ``stalwart checkpoint``)."""
    grid = table("Trial", "Batches", "State", metric or "Searcher metric", "UUID", "Size")
    for ckpt in checkpoints:
        grid.add_row(
            str(ckpt.trial_id or ""),
            str(ckpt.steps_completed if ckpt.steps_completed is not None else ""),
            state_text(ckpt.state),
            fmt_float(ckpt.data.training.searcher_metric),
            ckpt.uuid,
            _size(ckpt.size),
        )
    out().print(grid)


@app.command("list-checkpoints")
def list_checkpoints(
    experiment_id: Annotated[int, _ID],
    best: Annotated[
        int | None, typer.Option("--best", min=1, help="Only the N best by the searcher metric.")
    ] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List an experiment's checkpoints (oldest first, or the best first with --best)."""
    exp = client().get_experiment(experiment_id)
    if best is not None:
        found = exp.checkpoints(sort_by="SEARCHER_METRIC", limit=best)
    else:
        found = exp.checkpoints(sort_by="END_TIME")
    if as_json:
        print_json([c.data for c in found])
    else:
        checkpoints_table(found, exp.data.searcher_metric)


app.command("lc", hidden=True)(list_checkpoints)


@app.command("download-model-def")
def download_model_def(
    experiment_id: Annotated[int, _ID],
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Where to write the .tgz.")
    ] = Path("."),
) -> None:
    """Save the experiment's model definition as experiment_<ID>_model_def.tgz."""
    path = client().get_experiment(experiment_id).download_model_def(output_dir)
    out().print(f"Saved the model definition to {path}", markup=False)


@app.command("wait")
def wait(
    experiment_id: Annotated[int, _ID],
    timeout: Annotated[
        float | None, typer.Option(min=0, help="Give up after this many seconds.")
    ] = None,
    interval: Annotated[float, typer.Option(min=0.05, help="Seconds between checks.")] = 1.0,
) -> None:
    """Wait until the experiment ends; exit 0 only if it COMPLETED."""
    exp = client().get_experiment(experiment_id)
    with err().status(f"Experiment {experiment_id}: {exp.state}") as status:
        state = exp.wait(
            timeout,
            interval=interval,
            on_poll=lambda e: status.update(f"Experiment {e.id}: {e.state}"),
        )
    out().print(f"Experiment {experiment_id}: ", state_text(state), sep="")
    if state != "COMPLETED":
        raise ExperimentNotCompletedError(
            experiment_id,
            state,
            hint=f"see why with `stalwart experiment logs {experiment_id}`",
        )
