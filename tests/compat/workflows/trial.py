"""A small Core API trial for the ``det`` workflow tests (runs on the agent's own Python).

Hyperparameters: ``steps`` (training steps; each reports ``loss = 1 / step``), ``sleep`` (seconds
per step). Every second step reports validation metrics and stores a checkpoint, then checks for
preemption. Prints ``STEP <n>`` per step and ``PREEMPTED`` / ``DONE`` at the end.
"""

import json
import time

import stalwart as det


def main() -> None:
    info = det.get_cluster_info()
    assert info is not None
    assert info.trial is not None
    hparams = info.trial.hparams
    steps, pause = int(hparams["steps"]), float(hparams.get("sleep", 0))
    with det.core.init() as ctx:
        start = 0
        if info.latest_checkpoint is not None:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = json.loads((path / "state.json").read_text())["step"]
            print(f"RESTORED {start}", flush=True)
        for step in range(start + 1, steps + 1):
            time.sleep(pause)
            print(f"STEP {step}", flush=True)
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
            if step % 2 == 0:
                ctx.train.report_validation_metrics(
                    steps_completed=step, metrics={"loss": 1.0 / step}
                )
                with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    (path / "state.json").write_text(json.dumps({"step": step}))
                if ctx.preempt.should_preempt():
                    print("PREEMPTED", flush=True)
                    return
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
