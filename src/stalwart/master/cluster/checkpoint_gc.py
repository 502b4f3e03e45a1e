"""Checkpoint GC after an experiment ends (Determined's ``save_*`` storage policy).

Which checkpoints stay (:func:`checkpoints_to_keep`, pure): per trial its ``save_trial_latest``
newest (by steps completed) and its ``save_trial_best`` best (by the searcher metric of the
validation at the checkpoint's step), and the experiment's ``save_experiment_best`` best across
trials. Determined's defaults: 0, 1 and 1. Checkpoints without a validation never count as best.

:func:`collect_experiment` marks the other COMPLETED checkpoints DELETED through the transitions
module, then deletes the files of the experiment's DELETED checkpoints from storage (outside any
transaction; also those a user deleted), then marks the experiment ``checkpoints_collected``.
Checkpoints registered in the model registry are never collected, whatever the policy says
(:func:`~stalwart.master.services.models.registered_checkpoints`), nor are those a trial
warm-starts from (:func:`warm_start_sources`, as Determined's GC query leaves them out).
Storage it cannot reach from the master (cloud stores not yet supported here) is left alone:
the records stay, and the experiment is marked collected so the loop does not retry forever. A
master killed mid-way redoes the work (deleting is idempotent).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Checkpoint, Experiment, Trial
from stalwart.master.services.checkpoints import build_views
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.models import registered_checkpoints
from stalwart.master.transitions import set_checkpoint_state

__all__ = [
    "CheckpointFacts",
    "checkpoints_to_keep",
    "collect_experiment",
    "storage_directory",
    "warm_start_sources",
]

log = logging.getLogger("stalwart.cluster")


@dataclass(frozen=True)
class CheckpointFacts:
    """What GC needs to know about one checkpoint."""

    uuid: str
    trial_id: int
    steps_completed: int
    metric: float | None


def _count(storage: Mapping[str, Any], key: str, default: int) -> int:
    value = storage.get(key)
    return value if isinstance(value, int) and value >= 0 else default


def checkpoints_to_keep(
    facts: Sequence[CheckpointFacts], storage: Mapping[str, Any], *, smaller_is_better: bool
) -> set[str]:
    """The uuids GC keeps (see the module docstring)."""
    latest_n = _count(storage, "save_trial_latest", 1)
    best_n = _count(storage, "save_trial_best", 1)
    exp_best_n = _count(storage, "save_experiment_best", 0)

    def best(items: Sequence[CheckpointFacts], n: int) -> list[CheckpointFacts]:
        scored = [f for f in items if f.metric is not None]
        sign = 1.0 if smaller_is_better else -1.0
        scored.sort(key=lambda f: (sign * float(f.metric or 0.0), -f.steps_completed, f.uuid))
        return scored[:n]

    keep: set[str] = set()
    by_trial: dict[int, list[CheckpointFacts]] = {}
    for fact in facts:
        by_trial.setdefault(fact.trial_id, []).append(fact)
    for items in by_trial.values():
        newest = sorted(items, key=lambda f: (-f.steps_completed, f.uuid))[:latest_n]
        keep |= {f.uuid for f in newest}
        keep |= {f.uuid for f in best(items, best_n)}
    keep |= {f.uuid for f in best(facts, exp_best_n)}
    return keep


def storage_directory(storage: Mapping[str, Any]) -> Path | None:
    """The local directory that holds checkpoint ``<uuid>`` folders, if the master can reach it."""
    kind = storage.get("type")
    if kind == "shared_fs" and storage.get("host_path"):
        base = Path(str(storage["host_path"]))
        sub = storage.get("storage_path")
        return base / str(sub) if sub else base
    if kind == "directory" and storage.get("container_path"):
        return Path(str(storage["container_path"]))
    return None


def warm_start_sources(session: Session, uuids: Sequence[str]) -> set[str]:
    """Those of ``uuids`` that some trial starts from (``trials.warm_start_checkpoint``)."""
    found: set[str] = set()
    wanted = sorted(set(uuids))
    for start in range(0, len(wanted), 500):
        found.update(
            u
            for u in session.scalars(
                select(Trial.warm_start_checkpoint)
                .where(Trial.warm_start_checkpoint.in_(wanted[start : start + 500]))
                .distinct()
            )
            if u is not None
        )
    return found


def _mark_deleted(sessions: SessionFactory, doomed: Sequence[str]) -> None:
    """Mark the doomed checkpoints DELETED, each under its row lock (the lock registering a
    checkpoint takes), skipping any registered or changed since they were chosen."""
    with sessions() as session:
        for uuid in doomed:
            ckpt = session.scalar(
                select(Checkpoint)
                .where(Checkpoint.uuid == uuid)
                .with_for_update()
                .execution_options(populate_existing=True)
            )
            if ckpt is None or ckpt.state != "COMPLETED" or registered_checkpoints(session, [uuid]):
                continue
            if warm_start_sources(session, [uuid]):
                continue
            set_checkpoint_state(session, ckpt, "DELETED")
        session.commit()


def _deleted_files(sessions: SessionFactory, experiment_id: int) -> list[str]:
    """The DELETED, unregistered checkpoints of the experiment: their files go."""
    with sessions() as session:
        uuids = list(
            session.scalars(
                select(Checkpoint.uuid).where(
                    Checkpoint.experiment_id == experiment_id, Checkpoint.state == "DELETED"
                )
            )
        )
        registered = registered_checkpoints(session, uuids)
    return sorted(u for u in uuids if u not in registered)


def collect_experiment(sessions: SessionFactory, experiment_id: int) -> int:
    """GC one ended experiment's checkpoints; returns how many were deleted."""
    with sessions() as session:
        experiment = session.get(Experiment, experiment_id)
        if experiment is None or experiment.checkpoints_collected:
            return 0
        config = typed_config(experiment)
        # The pure helpers below read the section as JSON (as their tests and callers give it).
        storage = config.checkpoint_storage.to_dict() if config.checkpoint_storage else {}
        smaller = config.searcher.smaller_is_better
        ckpts = list(
            session.scalars(
                select(Checkpoint).where(
                    Checkpoint.experiment_id == experiment_id, Checkpoint.state == "COMPLETED"
                )
            )
        )
        facts = [
            CheckpointFacts(
                uuid=v.checkpoint.uuid,
                trial_id=v.checkpoint.trial_id or 0,
                steps_completed=v.checkpoint.steps_completed or 0,
                metric=v.searcher_metric,
            )
            for v in build_views(session, ckpts)
        ]
        registered = set(registered_checkpoints(session, [f.uuid for f in facts]))
        registered |= warm_start_sources(session, [f.uuid for f in facts])
    keep = checkpoints_to_keep(facts, storage, smaller_is_better=smaller) | registered
    doomed = sorted(f.uuid for f in facts if f.uuid not in keep)
    directory = storage_directory(storage)
    if directory is None:
        if doomed:
            log.info(
                "experiment %s: checkpoint storage %r is not reachable from the master; "
                "keeping %d checkpoints",
                experiment_id,
                storage.get("type"),
                len(doomed),
            )
    else:
        # Records first, files second: a checkpoint registered meanwhile is skipped here, and
        # once DELETED it can no longer be registered. A master killed before the experiment
        # is marked collected removes the files of the DELETED ones on its next pass.
        _mark_deleted(sessions, doomed)
        for uuid in _deleted_files(sessions, experiment_id):
            if "/" in uuid or "\\" in uuid or uuid in ("", ".", ".."):
                continue  # never a path outside the storage directory
            shutil.rmtree(directory / uuid, ignore_errors=True)
    with sessions() as session:
        experiment = session.get(Experiment, experiment_id)
        if experiment is not None:
            experiment.checkpoints_collected = True
        session.commit()
    return len(doomed) if directory is not None else 0
