"""A Core API trial written for Determined (``import determined as det``) that trains for the
length its experiment config gives (``searcher.max_length``, read through the 0.38 harness's
``ctx.searcher.operations()``), resuming from its latest checkpoint: what ``det e continue`` with
a larger ``max_length`` relies on. Run unchanged by the official 0.38.1 harness.

Each step reports training metrics; every second step (and the last) stores a checkpoint
(``state.json`` holds the step). The ``sleep`` hyperparameter slows the steps down. It prints
``RESTORED step=N`` when it resumes and ``TRAINED to=N`` when it is done.
"""

import json
import sys
import time

import determined as det  # type: ignore[import-not-found]  # the det venv has it
from determined import core


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    sleep = float(info.trial.hparams.get("sleep", 0))
    with core.init() as ctx:
        start = 0
        if info.latest_checkpoint is not None:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = json.loads((path / "state.json").read_text())["step"]
            print(f"RESTORED step={start}", flush=True)
        length = start
        for op in ctx.searcher.operations():
            length = op.length
            for step in range(start + 1, length + 1):
                ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1 / step})
                time.sleep(sleep)
                if step % 2 == 0 or step == length:
                    with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
                        (path / "state.json").write_text(json.dumps({"step": step}))
                op.report_progress(step)
            ctx.train.report_validation_metrics(
                steps_completed=length, metrics={"loss": 1 / length}
            )
            op.report_completed(1 / length)
        print(f"TRAINED to={length}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
