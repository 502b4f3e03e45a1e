"""Experiments, their trials and their checkpoints.

Each experiment is imported with its trials (and their TRIAL tasks) in one transaction, then
its checkpoints in another; the mapping rows commit with them. Configs are Determined's fully
defaulted ones, stored as they are, after Stalwart's config model has read them: keys it does
not know (Determined's ``preemption_timeout``...) are left out and named in the report, and an
experiment whose config it refuses for another reason is skipped with the problems.

States: ended experiments and trials keep theirs (a ``STOPPING_*`` one gets the state it was
stopping to). An experiment that was live (ACTIVE, RUNNING, PAUSED) is imported PAUSED with a
line in its notes when its search can be replayed (:mod:`stalwart.master.importer.replay`):
its trials take the request ids of the replayed searcher's ``Create`` actions, its live trials
are PAUSED (``det e activate`` resumes them from their latest checkpoints), trials the searcher
creates beyond Determined's are created PAUSED, and the snapshot is the experiment's
``searcher_state``. A live experiment whose search cannot be replayed (or an unmanaged one) is
imported CANCELED, with the reason in a note and in the report. Experiments being
deleted are skipped. Checkpoints keep their uuid, state, resources, metadata and storage:
they point at the same files, nothing is copied, and checkpoint GC leaves them alone
(``checkpoints_collected``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select

from stalwart.config import ExperimentConfig
from stalwart.config.validation import problems_from_error, render_problems
from stalwart.master.db.tables import (
    Checkpoint,
    Experiment,
    StorageBackend,
    Task,
    Trial,
    utcnow,
)
from stalwart.master.importer.context import Context, aware
from stalwart.master.importer.replay import (
    REPLAYED_KEY,
    Replay,
    ReplayError,
    ReplayTrial,
    Validation,
    replay,
)
from stalwart.master.importer.source import Row
from stalwart.master.services.tasks import create_trial
from stalwart.master.services.trials import storage_config_sha256

__all__ = ["import_checkpoint", "import_experiments", "stalwart_config"]

_ENDED = {
    "COMPLETED": "COMPLETED",
    "CANCELED": "CANCELED",
    "ERROR": "ERROR",
    "STOPPING_COMPLETED": "COMPLETED",
    "STOPPING_CANCELED": "CANCELED",
    "STOPPING_KILLED": "CANCELED",
    "STOPPING_ERROR": "ERROR",
}
"""Determined's ended (or ending) states and the state they are imported in."""
_LIVE = {"ACTIVE", "RUNNING", "PAUSED"}
_DELETING = {"DELETING", "DELETE_FAILED", "DELETED"}


class _RefusedError(Exception):
    """The config cannot be read by Stalwart (the problems are the message)."""


def _drop(config: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    node: Any = config
    for part in loc[:-1]:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if isinstance(node, dict) and loc and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


def stalwart_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Determined's stored config as Stalwart stores it, and the keys left out (dotted paths).

    Raises ``_RefusedError`` with the problems when Stalwart's config model refuses it for another
    reason than unknown keys.
    """
    result = copy.deepcopy(dict(config))
    dropped: list[str] = []
    for _ in range(20):
        try:
            ExperimentConfig.model_validate(result)
            return result, dropped
        except ValidationError as exc:
            errors = exc.errors()
            unknown = [e for e in errors if e["type"] == "extra_forbidden"]
            if len(unknown) != len(errors) or not all(_drop(result, e["loc"]) for e in unknown):
                problems = render_problems(problems_from_error(exc, ExperimentConfig, result))
                raise _RefusedError("; ".join(problems)) from None
            dropped += [".".join(str(p) for p in e["loc"]) for e in unknown]
    raise _RefusedError("the config could not be read")  # pragma: no cover - 20 rounds of keys


def _replayed(ctx: Context, old_id: int, config: dict[str, Any], trials: list[Row]) -> Replay:
    """The live experiment's search replayed into Stalwart's searcher (ReplayError if not)."""
    seen = [
        ReplayTrial(
            trial_id=int(t["id"]),
            state=_ENDED.get(str(t["state"]), "PAUSED"),
            end_time=aware(t["end_time"]),
            hparams=dict(t["hparams"] or {}),
        )
        for t in trials
    ]
    validations = [
        Validation(
            trial_id=int(v["trial_id"]),
            time=aware(v["end_time"]) or utcnow(),
            report_id=int(v["id"]),
            total_batches=int(v["total_batches"] or 0),
            metrics=dict(v["metrics"] or {}),
        )
        for v in ctx.source.validations(old_id)
    ]
    return replay(ExperimentConfig.model_validate(config), seen, validations)


def _trial_state(state: str, experiment_state: str, stopped: bool = False) -> str:
    """A Determined trial's state here, in an experiment imported in ``experiment_state``
    (``stopped``: a live trial the replayed searcher stopped)."""
    if stopped:
        return "COMPLETED"
    if state in _ENDED:
        return _ENDED[state]
    if experiment_state == "PAUSED":
        return "PAUSED"
    return "CANCELED"  # a live trial of an experiment that is not live here


def import_experiments(ctx: Context) -> None:
    """The selected projects' experiments, their trials and checkpoints."""
    for head in ctx.source.experiment_ids():
        if ctx.ids.get("project", head["project_id"]) is None:
            continue  # not a selected project (or one skipped, already reported)
        new_id = ctx.ids.get_int("experiment", head["id"])
        if new_id is None:
            new_id = _import_experiment(ctx, head["id"])
        else:
            ctx.report.count("experiment", "present")
            _import_new_trials(ctx, head["id"], new_id)
        if new_id is None:
            continue
        for old_trial, new_trial in _trial_pairs(ctx, head["id"]):
            ctx.trials.append((old_trial, new_trial))
        for row in ctx.source.checkpoints(head["id"]):
            import_checkpoint(ctx, row)
        ctx.commit()


def _import_new_trials(ctx: Context, old_id: int, new_id: int) -> None:
    """Trials Determined created after the experiment was imported (a search that went on):
    imported in the state their experiment here allows (ended, or CANCELED). An experiment
    imported PAUSED belongs to Stalwart's searcher (its replayed snapshot): Determined's later
    trials are not added to it, and the report says so."""
    experiment = ctx.session.get(Experiment, new_id)
    if experiment is None:
        return  # deleted here since: its mapping stays, nothing is brought back
    trials = ctx.source.trials(old_id)
    fresh = [t for t in trials if ctx.ids.get("trial", t["id"]) is None]
    if not fresh:
        return
    if experiment.searcher_state is not None:
        ctx.report.skip(
            "trial",
            ",".join(str(t["id"]) for t in fresh),
            f"created on Determined after experiment {old_id} was imported PAUSED "
            "(Stalwart's searcher runs that search now)",
        )
        return
    for trial in fresh:
        _import_trial(ctx, experiment, trial, None)
    ctx.commit()


def _trial_pairs(ctx: Context, experiment_id: int) -> list[tuple[int, int]]:
    pairs = []
    for row in ctx.source.all("SELECT id FROM runs WHERE experiment_id = %s", experiment_id):
        new = ctx.ids.get_int("trial", row["id"])
        if new is not None:
            pairs.append((int(row["id"]), new))
    return pairs


def _import_experiment(ctx: Context, old_id: int) -> int | None:
    row = ctx.source.experiment(old_id)
    if row["state"] in _DELETING:
        ctx.report.skip("experiment", old_id, f"it is being deleted in Determined ({row['state']})")
        return None
    try:
        config, dropped = stalwart_config(row["config"])
    except _RefusedError as exc:
        ctx.report.skip("experiment", old_id, f"Stalwart cannot read its config: {exc}")
        return None
    if dropped:
        ctx.report.notes.append(
            f"experiment {old_id}: config keys Stalwart does not use, left out: "
            + ", ".join(sorted(set(dropped)))
        )
    trials = ctx.source.trials(old_id)
    searcher_name = str(config["searcher"]["name"])
    notes = str(row["notes"] or "")
    state = _ENDED.get(row["state"], row["state"])
    searcher_state: dict[str, Any] | None = None
    replayed: Replay | None = None
    if row["state"] in _LIVE:
        why = ""
        if not row["unmanaged"]:
            try:
                replayed = _replayed(ctx, old_id, config, trials)
            except ReplayError as exc:
                why = str(exc)
        if replayed is not None:
            state = "PAUSED"
            searcher_state = {"snapshot": replayed.snapshot, "cursor": 0, REPLAYED_KEY: True}
            note = (
                f"Imported from Determined while {row['state']}: paused. Its {searcher_name} "
                "search was replayed into Stalwart's searcher; `det e activate` resumes its "
                "running trials from their latest checkpoints and goes on with the search."
            )
        elif row["unmanaged"]:
            state = "CANCELED"
            note = (
                f"Imported from Determined while {row['state']}: canceled. It is unmanaged "
                "(reported by a script outside the cluster); its trials, metrics and "
                "checkpoints are here."
            )
            ctx.report.skip("experiment_state", old_id, "a live unmanaged experiment (CANCELED)")
        else:
            state = "CANCELED"
            note = (
                f"Imported from Determined while {row['state']}: canceled, because its "
                f"{searcher_name} search could not be replayed in Stalwart: {why}. Its "
                "trials, metrics and checkpoints are here."
            )
            ctx.report.skip(
                "searcher_state", old_id, f"{searcher_name} search not replayed: {why} (CANCELED)"
            )
        notes = f"{notes}\n\n{note}" if notes else note
    owner = ctx.user_id(row["owner_id"])
    project = ctx.ids.get_int("project", row["project_id"])
    assert owner is not None
    assert project is not None
    parent = ctx.ids.get_int("experiment", row["parent_id"]) if row["parent_id"] else None
    job_id = str(row["job_id"])
    if ctx.session.scalar(select(Experiment.id).where(Experiment.job_id == job_id)):
        job_id = str(uuid.uuid4())
    experiment = Experiment(
        name=str(config.get("name") or f"Experiment {old_id}"),
        description=config.get("description") or None,
        labels=list(config.get("labels") or []),
        state=state,
        archived=bool(row["archived"]),
        project_id=project,
        owner_id=owner,
        original_config=row["original_config"] or "",
        config=config,
        model_definition=bytes(row["model_definition"]) if row["model_definition"] else None,
        searcher_type=searcher_name,
        resource_pool=str((config.get("resources") or {}).get("resource_pool") or "default"),
        job_id=job_id,
        parent_id=parent,
        progress=row["progress"],
        start_time=aware(row["start_time"]) or utcnow(),
        end_time=aware(row["end_time"]) if state in _ENDED.values() else None,
        searcher_state=searcher_state,
        checkpoints_collected=True,
        unmanaged=bool(row["unmanaged"]),
        external_experiment_id=row["external_experiment_id"],
        notes=notes,
    )
    if state == "CANCELED" and experiment.end_time is None:
        experiment.end_time = utcnow()
    new_id = ctx.add("experiment", experiment, old_id)
    for trial in trials:
        _import_trial(ctx, experiment, trial, replayed)
    if replayed is not None:
        for create in replayed.creates:
            create_trial(
                ctx.session,
                experiment,
                hparams=create.hparams,
                seed=create.trial_seed,
                request_id=create.request_id,
                state="PAUSED",
            )
    ctx.commit()
    return new_id


def _import_trial(ctx: Context, experiment: Experiment, row: Row, replayed: Replay | None) -> None:
    old = int(row["id"])
    bound = replayed.requests.get(old) if replayed else None
    request = bound or str(row["request_id"] or uuid.uuid4())
    task_id = f"{experiment.id}.{request}"
    stopped = replayed is not None and old in replayed.stopped
    state = _trial_state(str(row["state"]), experiment.state, stopped)
    ended = state in _ENDED.values()
    ctx.session.add(
        Task(
            task_id=task_id,
            task_type="TRIAL",
            owner_id=experiment.owner_id,
            experiment_id=experiment.id,
            start_time=aware(row["start_time"]) or utcnow(),
            end_time=(aware(row["end_time"]) or utcnow()) if ended else None,
        )
    )
    runner_state = str(row["runner_state"] or "")
    trial = Trial(
        experiment_id=experiment.id,
        request_id=request,
        task_id=task_id,
        state=state,
        hparams=dict(row["hparams"] or {}),
        seed=int(row["seed"] or 0),
        restarts=int(row["restarts"] or 0),
        run_id=int(row["restart_id"] or 0),
        start_time=aware(row["start_time"]) or utcnow(),
        end_time=(aware(row["end_time"]) or utcnow()) if ended else None,
        total_batches=int(row["total_batches"] or 0),
        runner_state="" if runner_state == "UNSPECIFIED" else runner_state,
        searcher_metric_value=row["searcher_metric_value"],
        latest_checkpoint=row["latest_checkpoint"],
        warm_start_checkpoint=row["warm_start_uuid"],
        searcher_stopped=stopped,
    )
    new_id = ctx.add("trial", trial, int(row["id"]))
    task = ctx.session.get(Task, task_id)
    assert task is not None
    task.trial_id = new_id
    task.name = f"Trial {new_id} (Experiment {experiment.id})"
    if row["task_id"]:
        ctx.ids.record("task", row["task_id"], task_id)


def _storage_id(ctx: Context, old: int | None) -> int | None:
    if old is None:
        return None
    known = ctx.ids.get_int("storage", old)
    if known is not None:
        return known
    config = ctx.source.storage_configs().get(old)
    if config is None:
        return None
    digest = storage_config_sha256(config)
    found = ctx.session.scalar(
        select(StorageBackend.id).where(StorageBackend.config_sha256 == digest)
    )
    if found is None:
        backend = StorageBackend(config_sha256=digest, config=config)
        ctx.session.add(backend)
        ctx.session.flush()
        found = backend.id
    ctx.ids.record("storage", old, found)
    return int(found)


def import_checkpoint(ctx: Context, row: Row) -> bool:
    """One checkpoint (no commit); whether it is here now (imported, or before)."""
    uuid_text = str(row["uuid"])
    if ctx.ids.get("checkpoint", uuid_text) is not None:
        ctx.report.count("checkpoint", "present")
        return True
    if ctx.session.get(Checkpoint, uuid_text) is not None:
        ctx.report.skip("checkpoint", uuid_text, "a checkpoint with this uuid exists here")
        return False
    trial_id = ctx.ids.get_int("trial", row["run_id"]) if row["run_id"] is not None else None
    trial = ctx.session.get(Trial, trial_id) if trial_id is not None else None
    metadata = dict(row["metadata"] or {})
    steps = metadata.get("steps_completed")
    old_task = row["task_id"]
    task_id = ctx.ids.get("task", old_task) if old_task else None
    ctx.session.add(
        Checkpoint(
            uuid=uuid_text,
            task_id=task_id or (trial.task_id if trial else old_task),
            allocation_id=row["allocation_id"],
            trial_id=trial_id,
            experiment_id=trial.experiment_id if trial else None,
            state=str(row["state"]),
            report_time=aware(row["report_time"]) or utcnow(),
            resources=dict(row["resources"] or {}),
            metadata_=metadata,
            storage_id=_storage_id(ctx, row["storage_id"]),
            steps_completed=int(steps) if isinstance(steps, int | float) else None,
            size=int(row["size"] or 0),
        )
    )
    ctx.ids.record("checkpoint", uuid_text, uuid_text)
    ctx.report.count("checkpoint", "imported")
    return True
