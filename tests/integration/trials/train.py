"""A small Core API trial for the integration tests (``import stalwart as det``).

Hyperparameters: ``steps`` (training length), ``period`` (validate and checkpoint every N steps),
``sleep`` (seconds per step), ``x`` (the loss is smallest at x = 0.3), ``fail_at`` (the first run
exits with code 3 right after step N), ``fail_always`` (every run fails at ``fail_at``).
Resumes from ``DET_LATEST_CHECKPOINT`` and stops early (exit 0) when asked to preempt.
"""

import json
import os
import sys
import time

import stalwart as det


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    assert info.trial is not None
    hp = info.trial.hparams
    steps = int(hp.get("steps", 10))
    period = int(hp.get("period", 2))
    sleep = float(hp.get("sleep", 0.02))
    x = float(hp.get("x", 1.0))
    fail_at = int(hp.get("fail_at", 0))
    first_run = int(os.environ["DET_TRIAL_RUN_ID"]) == 1
    with det.core.init() as ctx:
        start = 0
        if info.latest_checkpoint:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = json.loads((path / "state.json").read_text())["step"]
            print(f"resumed from step {start}", flush=True)
        for step in range(start + 1, steps + 1):
            time.sleep(sleep)
            loss = (x - 0.3) ** 2 + 1.0 / step
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
            if step % period == 0 or step == steps:
                ctx.train.report_validation_metrics(
                    steps_completed=step, metrics={"loss": loss, "batches": step}
                )
                with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _uuid):
                    (path / "state.json").write_text(json.dumps({"step": step}))
                ctx.train.report_progress(step / steps)
                if ctx.preempt.should_preempt():
                    print(f"preempted after step {step}", flush=True)
                    return 0
            if fail_at and step == fail_at and (first_run or hp.get("fail_always")):
                print(f"failing on purpose at step {step}", flush=True)
                return 3
    print("training done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
