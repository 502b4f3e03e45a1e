"""A Core API trial for the fault tests: it records its pid, reports every step and checkpoints.

Hyperparameters: ``steps``, ``period`` (validate and checkpoint every N steps), ``sleep`` (seconds
per step), ``x`` (the loss is smallest at x = 0.3) and ``pid_dir``: each run writes its pid to
``<pid_dir>/<trial id>-<run id>.pid`` (and its working directory to ``.cwd``) before it reports
anything, so a test can SIGKILL it and can tell afterwards which runs there were and where.
After each acknowledged checkpoint it prints ``checkpointed step N``; a resumed run prints
``resumed from step N``. ``stall_after`` and ``stall_seconds``: run 1 sleeps that long after
that step (a long step that reports nothing).
"""

import json
import os
import sys
import time
from pathlib import Path

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
    run_id = os.environ["DET_TRIAL_RUN_ID"]
    stall_after = int(hp.get("stall_after", 0))
    stall_seconds = float(hp.get("stall_seconds", 0))
    pid_file = Path(str(hp["pid_dir"])) / f"{info.trial.trial_id}-{run_id}.pid"
    pid_file.write_text(str(os.getpid()))
    pid_file.with_suffix(".cwd").write_text(os.getcwd())  # where it ran: which agent's home
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
                print(f"checkpointed step {step}", flush=True)
                ctx.train.report_progress(step / steps)
                if step == stall_after and run_id == "1":
                    print(f"stalling after step {step}", flush=True)
                    time.sleep(stall_seconds)
                if ctx.preempt.should_preempt():
                    print(f"preempted after step {step}", flush=True)
                    return 0
    print("training done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
