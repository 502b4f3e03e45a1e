"""An unmanaged (detached) run through the official SDK's ``core_v2``, unmodified.

Run with the det-venv python: ``unmanaged_sdk.py MASTER_URL STORAGE_DIR EXTERNAL_ID``. A plain
script (no task, no agent): logs in as ``admin``, ``core_v2.init`` with the external experiment
and trial id ``EXTERNAL_ID``, reports three training and one validation metrics, stores a
checkpoint under ``STORAGE_DIR``, closes, then reads back through the SDK what the master
keeps (and the trial by its external ids, ``GET /api/v1/trials/by-external-id/...``).
Prints one line ``SDK_RESULT <json>``.
"""

from __future__ import annotations

import json
import sys

from determined.common.api import bindings  # type: ignore[import-not-found]
from determined.experimental import client, core_v2  # type: ignore[import-not-found]


def main() -> None:
    master, storage, external = sys.argv[1], sys.argv[2], sys.argv[3]
    sdk = client.Determined(master=master, user="admin", password="")
    core_v2.init(
        config=core_v2.Config(
            name="detached",
            hparams={"lr": 0.1},
            labels=["offline"],
            checkpoint_storage=storage,
            external_experiment_id=external,
            external_trial_id=external,
        ),
        client=sdk,
    )
    assert core_v2.info is not None
    assert core_v2.train is not None
    info = core_v2.info
    result: dict[str, object] = {
        "experiment": info.trial.experiment_id,
        "trial": info.trial.trial_id,
        "run": info.trial._trial_run_id,
        "resumed_from": info.latest_checkpoint,
    }
    start = (info.trial._steps_completed or 0) if info.latest_checkpoint else 0
    for step in (1, 2, 3):
        core_v2.train.report_training_metrics(
            steps_completed=start + step * 10, metrics={"loss": 1.0 / step}
        )
    core_v2.train.report_validation_metrics(steps_completed=start + 30, metrics={"val_loss": 0.25})
    with core_v2.checkpoint.store_path({"steps_completed": start + 30}) as (path, uuid):
        (path / "model.txt").write_text("weights")
    result["checkpoint"] = uuid
    print("training done")
    core_v2.close()

    exp = sdk.get_experiment(info.trial.experiment_id)
    trial = sdk.get_trial(info.trial.trial_id)
    result["state"] = exp.state.value
    result["labels"] = sorted(exp.labels or [])
    result["trial_state"] = trial.state.value
    result["trial_hparams"] = trial.hparams
    result["training"] = [
        [m.steps_completed, m.metrics["loss"]] for m in trial.iter_metrics("training")
    ]
    result["validation"] = [
        [m.steps_completed, m.metrics["val_loss"]] for m in trial.iter_metrics("validation")
    ]
    result["checkpoints"] = [c.uuid for c in exp.list_checkpoints()]
    result["trials"] = [t.id for t in exp.list_trials()]
    by_external = bindings.get_GetTrialByExternalID(
        sdk._session, externalExperimentId=external, externalTrialId=external
    )
    result["by_external_id"] = by_external.trial.id
    print("SDK_RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
