"""Warm starts (``searcher.source_checkpoint_uuid`` / ``source_trial_id``) on an in-process
master: the trial records its source, and checkpoint GC keeps a checkpoint a trial starts
from. The official harness restoring it runs in ``tests/compat/test_det_harness_calls.py``."""

from __future__ import annotations

import uuid
from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.master.cluster.checkpoint_gc import collect_experiment
from stalwart.master.db.tables import Checkpoint, Trial
from tests.master.test_allocations_api import add_trial, create_experiment, master_state
from tests.master.test_checkpoints_api import report
from tests.master.test_experiments_api import complete


def test_gc_keeps_a_checkpoint_a_trial_starts_from(
    client: TestClient, admin: dict[str, str], tmp_path: Path
) -> None:
    storage = tmp_path / "storage"
    config = (
        "entrypoint: python3 train.py\n"
        f"checkpoint_storage:\n  type: shared_fs\n  host_path: {storage}\n"
        "searcher:\n  name: single\n  metric: loss\n"
    )
    state = master_state(client)
    source = add_trial(state, create_experiment(client, admin, config))
    uuids = {steps: str(uuid.uuid4()) for steps in (2, 4, 6)}
    for steps, name in uuids.items():
        report(client, source, name, steps)
        (storage / name).mkdir(parents=True)

    warm_config = config + f"  source_checkpoint_uuid: {uuids[2]}\n"
    warm = add_trial(state, create_experiment(client, admin, warm_config))
    with state.sessions() as session:
        trial = session.get(Trial, warm.trial_id)
        assert trial is not None
        assert trial.warm_start_checkpoint == uuids[2]
    answered = client.get(f"/api/v1/trials/{warm.trial_id}", headers=admin).json()
    assert answered["trial"]["warmStartCheckpointUuid"] == uuids[2]

    complete(client, source.experiment_id)
    assert collect_experiment(state.sessions, source.experiment_id) == 1
    with state.sessions() as session:
        states = {
            c.uuid: c.state
            for c in session.query(Checkpoint).filter_by(experiment_id=source.experiment_id)
        }
    # the latest stays by policy, the warm-start source because a trial starts from it
    assert states == {uuids[2]: "COMPLETED", uuids[4]: "DELETED", uuids[6]: "COMPLETED"}
    assert (storage / uuids[2]).exists()
    assert not (storage / uuids[4]).exists()


def test_source_trial_id_picks_its_latest_completed_checkpoint(
    client: TestClient, admin: dict[str, str]
) -> None:
    config = "entrypoint: python3 train.py\nsearcher:\n  name: single\n  metric: loss\n"
    state = master_state(client)
    source = add_trial(state, create_experiment(client, admin, config))
    latest = str(uuid.uuid4())
    report(client, source, str(uuid.uuid4()), 2)
    report(client, source, latest, 5)
    warm = add_trial(
        state,
        create_experiment(client, admin, config + f"  source_trial_id: {source.trial_id}\n"),
    )
    answered = client.get(f"/api/v1/trials/{warm.trial_id}", headers=admin).json()
    assert answered["trial"]["warmStartCheckpointUuid"] == latest


def test_a_checkpoint_deleted_after_gc_loses_its_files_at_the_next_pass(
    client: TestClient, admin: dict[str, str], tmp_path: Path
) -> None:
    """``det checkpoint delete`` on an experiment GC already went through: its files go too."""
    storage = tmp_path / "storage"
    config = (
        "entrypoint: python3 train.py\n"
        f"checkpoint_storage:\n  type: shared_fs\n  host_path: {storage}\n"
        "  save_trial_latest: 2\n"
        "searcher:\n  name: single\n  metric: loss\n"
    )
    state = master_state(client)
    trial = add_trial(state, create_experiment(client, admin, config))
    uuids = {steps: str(uuid.uuid4()) for steps in (2, 4)}
    for steps, name in uuids.items():
        report(client, trial, name, steps)
        (storage / name).mkdir(parents=True)
    complete(client, trial.experiment_id)
    assert collect_experiment(state.sessions, trial.experiment_id) == 0  # the policy keeps both
    deleted = client.request(
        "DELETE",
        "/api/v1/checkpoints",
        json={"checkpointUuids": [uuids[2]]},
        headers=admin,
    )
    assert deleted.status_code == 200, deleted.text
    assert (storage / uuids[2]).exists()  # records first; files at GC's next pass
    collect_experiment(state.sessions, trial.experiment_id)
    assert not (storage / uuids[2]).exists()
    assert (storage / uuids[4]).exists()
