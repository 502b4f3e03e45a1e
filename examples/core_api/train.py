"""A Core API training script: it reports metrics and checkpoints, and honours preemption.

It is written for Determined's Core API and runs unchanged on Stalwart; only the import line
differs (``import determined as det`` on Determined).
"""

import json
import pathlib

import stalwart as det


def main(core_context: "det.core.Context") -> None:
    info = det.get_cluster_info()
    hparams = info.trial.hparams if info else {"increment_by": 1}
    x, steps = 0, 0
    latest = info.latest_checkpoint if info else None
    if latest is not None:
        with core_context.checkpoint.restore_path(latest) as path:
            state = json.loads((pathlib.Path(path) / "state.json").read_text())
            x, steps = state["x"], state["steps"]
    while steps < 100:
        x += hparams["increment_by"]
        steps += 1
        if steps % 10 == 0:
            core_context.train.report_training_metrics(steps_completed=steps, metrics={"x": x})
            core_context.train.report_validation_metrics(
                steps_completed=steps, metrics={"loss": 1.0 / (1 + x), "batches": steps}
            )
            with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                (pathlib.Path(path) / "state.json").write_text(json.dumps({"x": x, "steps": steps}))
            if core_context.preempt.should_preempt():
                return


if __name__ == "__main__":
    with det.core.init() as core_context:
        main(core_context)
