"""Checkpoint GC after an experiment ends (Determined's ``save_*`` storage policy).

Which checkpoints stay (:func:`checkpoints_to_keep`, pure): per trial its ``save_trial_latest``
newest (by steps completed) and its ``save_trial_best`` best (by the searcher metric of the
validation at the checkpoint's step), and the experiment's ``save_experiment_best`` best across
trials. Determined's defaults: 0, 1 and 1. Checkpoints without a validation never count as best.

:func:`collect_experiment` deletes the other COMPLETED checkpoints' files from storage (outside
any transaction), then marks them DELETED through the transitions module and the experiment
``checkpoints_collected``. Storage it cannot reach from the master (cloud stores not yet
supported here) is left alone: the records stay, and the experiment is marked collected so the
loop does not retry forever. A master killed mid-way redoes the work (deleting is idempotent).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Checkpoint, Experiment
from stalwart.master.services.checkpoints import build_views
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.transitions import set_checkpoint_state

__all__ = ["CheckpointFacts", "checkpoints_to_keep", "collect_experiment", "storage_directory"]

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
    keep = checkpoints_to_keep(facts, storage, smaller_is_better=smaller)
    doomed = sorted(f.uuid for f in facts if f.uuid not in keep)
    directory = storage_directory(storage)
    if directory is None and doomed:
        log.info(
            "experiment %s: checkpoint storage %r is not reachable from the master; "
            "keeping %d checkpoints",
            experiment_id,
            storage.get("type"),
            len(doomed),
        )
        doomed = []
    for uuid in doomed:
        assert directory is not None
        if "/" in uuid or "\\" in uuid or uuid in ("", ".", ".."):
            continue  # never a path outside the storage directory
        shutil.rmtree(directory / uuid, ignore_errors=True)
    with sessions() as session:
        for uuid in doomed:
            ckpt = session.get(Checkpoint, uuid)
            if ckpt is not None and ckpt.state == "COMPLETED":
                set_checkpoint_state(session, ckpt, "DELETED")
        experiment = session.get(Experiment, experiment_id)
        if experiment is not None:
            experiment.checkpoints_collected = True
        session.commit()
    return len(doomed)
