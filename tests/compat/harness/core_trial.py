"""A Core API trial written for Determined (``import determined as det``), run unchanged on
Stalwart by the official 0.38.1 harness. What it does is chosen by its hyperparameters:

- ``steps``: training steps; each reports training metrics, every second one stores a checkpoint
  (``state.json``) and checks for preemption; the last step reports validation metrics.
- ``fail_at``: on a run without a checkpoint to restore, exit 1 right after the checkpoint of
  that step (the restart then restores it).
- ``sleep``: seconds per step (so that a pause can catch it running).
- ``validate``: also report validation metrics (``loss`` = ``lr / step`` and ``batches``) at
  every checkpoint, as an ``adaptive_asha`` search wants them.
- ``meet``: wait until that many trials of the experiment have checked in under
  ``/determined_shared_fs`` (they run at the same time), then check that this trial's
  ``/run/determined`` holds only its own marker and its own ``cluster.json``.

It prints lines starting with ``CLUSTER_INFO``, ``RESTORED``, ``SEEN``, ``PREEMPTED`` for the test.
"""

import json
import os
import pathlib
import sys
import time

import determined as det  # type: ignore[import-not-found]  # the det venv has it
from determined import core

RUN_DIR = pathlib.Path("/run/determined")
SHARED = pathlib.Path("/determined_shared_fs")


def meet(info: det.ClusterInfo, count: int) -> int:
    trial = info.trial
    marker = RUN_DIR / f"mine-{trial.trial_id}"
    marker.write_text(info.allocation_id)
    room = SHARED / "meet" / str(trial.experiment_id)
    room.mkdir(parents=True, exist_ok=True)
    (room / str(trial.trial_id)).write_text("here")
    deadline = time.time() + 60
    while len(list(room.iterdir())) < count:
        if time.time() > deadline:
            print("MEET timed out", flush=True)
            return 3
        time.sleep(0.1)
    seen = sorted(p.name for p in RUN_DIR.glob("mine-*"))
    cluster = json.loads((RUN_DIR / "info" / "cluster.json").read_text())
    print("SEEN " + json.dumps({"markers": seen, "allocation_id": cluster["allocation_id"]}))
    if seen != [marker.name] or cluster["allocation_id"] != os.environ["DET_ALLOCATION_ID"]:
        return 4
    return 0


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    assert info.task_type == "TRIAL"
    hparams = info.trial.hparams
    summary = {
        "trial_id": info.trial.trial_id,
        "experiment_id": info.trial.experiment_id,
        "allocation_id": info.allocation_id,
        "task_id": info.task_id,
        "latest_checkpoint": info.latest_checkpoint,
        "hparams": hparams,
        "container_addrs": info.container_addrs,
        "model_copy": sorted(os.listdir(RUN_DIR / "train" / "model")),
        "workdir": os.path.samefile(os.getcwd(), RUN_DIR / "workdir"),
    }
    print("CLUSTER_INFO " + json.dumps(summary), flush=True)
    if hparams.get("meet") and meet(info, int(hparams["meet"])):
        return 4
    steps = int(hparams["steps"])
    with core.init() as ctx:  # the defaults: TensorBoard files written and uploaded (AUTO)
        start = 0
        if info.latest_checkpoint is not None:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = json.loads((path / "state.json").read_text())["step"]
            print(f"RESTORED step={start}", flush=True)
        for step in range(start + 1, steps + 1):
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
            time.sleep(float(hparams.get("sleep", 0)))
            if step % 2:
                continue
            if hparams.get("validate"):
                metrics = {"loss": float(hparams.get("lr", 1.0)) / step, "batches": step}
                ctx.train.report_validation_metrics(steps_completed=step, metrics=metrics)
            with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step}))
            if step == hparams.get("fail_at") and info.latest_checkpoint is None:
                print("FAILING on purpose", flush=True)
                return 1
            if ctx.preempt.should_preempt():
                print(f"PREEMPTED step={step}", flush=True)
                return 0
        ctx.train.report_validation_metrics(steps_completed=steps, metrics={"loss": 1.0 / steps})
    return 0


if __name__ == "__main__":
    sys.exit(main())
