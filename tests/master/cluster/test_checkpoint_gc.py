"""Which checkpoints GC keeps (Determined's save_experiment_best / save_trial_best / latest)."""

from __future__ import annotations

from pathlib import Path

from stalwart.master.cluster.checkpoint_gc import (
    CheckpointFacts,
    checkpoints_to_keep,
    storage_directory,
)

FACTS = [
    CheckpointFacts("a1", 1, 10, 0.9),
    CheckpointFacts("a2", 1, 20, 0.4),  # trial 1's best
    CheckpointFacts("a3", 1, 30, 0.6),  # trial 1's latest
    CheckpointFacts("b1", 2, 10, 0.2),  # trial 2's best, the experiment's best
    CheckpointFacts("b2", 2, 20, None),  # trial 2's latest (no validation)
]


def test_defaults_keep_each_trials_latest_and_best() -> None:
    keep = checkpoints_to_keep(FACTS, {}, smaller_is_better=True)
    assert keep == {"a2", "a3", "b1", "b2"}


def test_larger_is_better_flips_best() -> None:
    keep = checkpoints_to_keep(FACTS, {}, smaller_is_better=False)
    assert keep == {"a1", "a3", "b1", "b2"}


def test_experiment_best_only() -> None:
    storage = {"save_trial_latest": 0, "save_trial_best": 0, "save_experiment_best": 2}
    assert checkpoints_to_keep(FACTS, storage, smaller_is_better=True) == {"b1", "a2"}


def test_keep_nothing() -> None:
    storage = {"save_trial_latest": 0, "save_trial_best": 0, "save_experiment_best": 0}
    assert checkpoints_to_keep(FACTS, storage, smaller_is_better=True) == set()


def test_storage_directory() -> None:
    assert storage_directory({"type": "shared_fs", "host_path": "/x", "storage_path": "y"}) == Path(
        "/x/y"
    )
    assert storage_directory({"type": "directory", "container_path": "/d"}) == Path("/d")
    assert storage_directory({"type": "s3", "bucket": "b"}) is None
