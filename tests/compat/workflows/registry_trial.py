"""A Core API trial for the model-registry tests (runs on the agent's own Python).

Hyperparameters: ``steps`` (training steps; a checkpoint with ``state.json`` every second step,
validation metrics only at the last step, so GC's default policy keeps only the last
checkpoint) and ``gate`` (a path: after the first checkpoint the trial waits until that file
exists, so a test can register the checkpoint while the trial still runs). Prints ``STEP <n>``
per step and ``DONE`` at the end.
"""

import json
import pathlib
import sys
import time

import stalwart as det

GATE_TIMEOUT_S = 120.0


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    assert info.trial is not None
    hparams = info.trial.hparams
    steps, gate = int(hparams["steps"]), pathlib.Path(str(hparams["gate"]))
    with det.core.init() as ctx:
        for step in range(1, steps + 1):
            print(f"STEP {step}", flush=True)
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
            if step % 2:
                continue
            if step == steps:
                ctx.train.report_validation_metrics(
                    steps_completed=step, metrics={"loss": 1.0 / step}
                )
            with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step}))
            if step == 2:
                deadline = time.monotonic() + GATE_TIMEOUT_S
                while not gate.exists():
                    if time.monotonic() > deadline:
                        print(f"GATE {gate} never opened", flush=True)
                        return 1
                    time.sleep(0.1)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
