"""Routes outside ``/api/v1`` that Determined's master serves and its clients call by path:
``GET /tasks`` (live allocations, polled by scripts waiting for checkpoint GC), ``GET
/checkpoints/{uuid}`` (the SDK's ``Checkpoint.download(mode=MASTER)``: an archive of the
checkpoint's files) and ``GET /experiments/{id}/preview_gc`` (``det e set gc-policy``'s
preview).

Contracts:

- ``/tasks`` is a JSON object: allocation id -> summary, with Determined's snake_case keys, the
  allocations the caller may see (as ``GET /api/v1/tasks``).
- ``/checkpoints/{uuid}`` answers the archive the ``Accept`` header names: ``application/x-tar``
  (also for none, ``*/*`` and ``application/*``), ``application/gzip`` or ``application/zip``;
  another type is 415. The members are the checkpoint's files under their relative paths. A
  checkpoint whose files are gone is 404.
- ``/experiments/{id}/preview_gc`` lists the COMPLETED checkpoints that the given
  ``save_experiment_best`` / ``save_trial_best`` / ``save_trial_latest`` (each default 0) would
  delete (registered ones never are), with ``metric_name``; Determined's Go field names.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import StreamingResponse
from sqlalchemy import select
from starlette.background import BackgroundTask

from stalwart.errors import NotFoundError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import wire_time
from stalwart.master.api.tasks import live_summaries
from stalwart.master.cluster.checkpoint_gc import CheckpointFacts, checkpoints_to_keep
from stalwart.master.db.tables import Checkpoint, Experiment
from stalwart.master.services import checkpoints as ckpt_service
from stalwart.master.services.checkpoint_files import storage_of
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.models import registered_checkpoints
from stalwart.storage.errors import CheckpointNotFoundError

__all__ = ["router"]

router = APIRouter(tags=["legacy"])

_TAR = "application/x-tar"
_GZIP = "application/gzip"
_ZIP = "application/zip"


@router.get("/tasks")
def legacy_tasks(caller: CallerDep, session: SessionDep) -> dict[str, Any]:
    """Live allocations by id, with Determined's snake_case keys."""
    out: dict[str, Any] = {}
    for allocation_id, summary in live_summaries(session, caller).items():
        entry = summary.model_dump(mode="json", by_alias=False)
        for resources in entry.get("resources") or []:
            devices = resources.get("agent_devices") or {}
            resources["agent_devices"] = {
                agent: listed.get("devices", []) for agent, listed in devices.items()
            }
        entry["resources"] = entry.get("resources") or []
        out[allocation_id] = entry
    return out


def _archive(source: Path, kind: str) -> str:
    """An archive of ``source``'s files in a temporary file; its path."""
    fd, path = tempfile.mkstemp(prefix="stalwart-checkpoint-", suffix=".archive")
    os.close(fd)
    files = sorted(p for p in source.rglob("*") if p.is_file())
    if kind == _ZIP:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for file in files:
                zf.write(file, file.relative_to(source).as_posix())
        return path
    with tarfile.open(path, "w:gz") if kind == _GZIP else tarfile.open(path, "w") as tf:
        for file in files:
            tf.add(file, arcname=file.relative_to(source).as_posix())
    return path


def _stream(path: str) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            yield chunk


@router.get("/checkpoints/{uuid}")
def download_checkpoint(
    uuid: str,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    accept: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The checkpoint's files as one archive (see the contract)."""
    kind = (accept or "").strip()
    if kind in ("", "*/*", "application/*"):
        kind = _TAR
    if kind not in (_TAR, _GZIP, _ZIP):
        raise HTTPException(
            415,
            f"unsupported media type to download a checkpoint: '{accept}' (ask for "
            f"{_TAR}, {_GZIP} or {_ZIP})",
        )
    ckpt = ckpt_service.get_checkpoint(session, uuid)
    storage = storage_of(session, ckpt, state.settings.default_checkpoint_storage)
    session.close()  # no connection held while files move
    with tempfile.TemporaryDirectory(prefix="stalwart-download-") as tmp:
        target = Path(tmp) / "checkpoint"
        target.mkdir()
        try:
            storage.download(uuid, target)
        except CheckpointNotFoundError as exc:
            raise NotFoundError(f"checkpoint {uuid} has no files in storage: {exc}") from exc
        path = _archive(target, kind)

    def cleanup() -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)

    return StreamingResponse(
        _stream(path),
        media_type=kind,
        headers={"Content-Length": str(os.path.getsize(path))},
        background=BackgroundTask(cleanup),
    )


def _go_checkpoint(view: ckpt_service.CheckpointView) -> dict[str, Any]:
    ckpt = view.checkpoint
    return {
        "ID": 0,
        "UUID": ckpt.uuid,
        "TaskID": ckpt.task_id,
        "AllocationID": ckpt.allocation_id,
        "ReportTime": wire_time(ckpt.report_time),
        "State": ckpt.state,
        "Resources": dict(ckpt.resources or {}),
        "Metadata": dict(ckpt.metadata_ or {}),
        "Size": ckpt.size or 0,
        "StorageID": ckpt.storage_id,
        "TrialID": view.trial_id,
        "ExperimentID": view.experiment_id,
        "ExperimentConfig": view.experiment_config,
        "HParams": view.hparams,
        "TrainingMetrics": view.training.avg if view.training else None,
        "ValidationMetrics": view.validation.avg if view.validation else None,
        "SearcherMetric": view.searcher_metric,
        "StepsCompleted": ckpt.steps_completed or 0,
    }


@router.get("/experiments/{experiment_id}/preview_gc")
def preview_gc(
    experiment_id: int,
    _caller: CallerDep,
    session: SessionDep,
    save_experiment_best: Annotated[int, Query(ge=0)] = 0,
    save_trial_best: Annotated[int, Query(ge=0)] = 0,
    save_trial_latest: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The checkpoints the policy would delete, and the searcher's metric name."""
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    config = typed_config(experiment)
    ckpts = list(
        session.scalars(
            select(Checkpoint).where(
                Checkpoint.experiment_id == experiment_id, Checkpoint.state == "COMPLETED"
            )
        )
    )
    views = ckpt_service.build_views(session, ckpts)
    facts = [
        CheckpointFacts(
            uuid=v.checkpoint.uuid,
            trial_id=v.checkpoint.trial_id or 0,
            steps_completed=v.checkpoint.steps_completed or 0,
            metric=v.searcher_metric,
        )
        for v in views
    ]
    policy = {
        "save_experiment_best": save_experiment_best,
        "save_trial_best": save_trial_best,
        "save_trial_latest": save_trial_latest,
    }
    keep = checkpoints_to_keep(facts, policy, smaller_is_better=config.searcher.smaller_is_better)
    keep |= set(registered_checkpoints(session, [f.uuid for f in facts]))
    doomed = [_go_checkpoint(v) for v in views if v.checkpoint.uuid not in keep]
    doomed.sort(key=lambda c: (c["TrialID"] or 0, c["ReportTime"] or ""))
    return {"checkpoints": doomed, "metric_name": config.searcher.metric}
