"""The chaos soak's trial (``bench/soak.py``): a Core API script that journals what it does.

Hyperparameters: ``x`` (the loss is smallest at x = 0.3), ``step_seconds``, ``period``
(validate and checkpoint every N steps), ``journal`` (a directory). Each run appends lines to
``<journal>/<trial id>.log`` (one ``write`` each, so lines of overlapping runs never mix):

- ``start RUN FROM``: run RUN begins after step FROM (0, or its latest checkpoint's step);
- ``report RUN GROUP STEP``: a metrics report was handed to the harness (it ships them in order,
  retrying while the master is away);
- ``ckpt RUN STEP UUID``: the master acknowledged the checkpoint of STEP;
- ``end RUN``: the run ended by itself, every report flushed (acknowledged by the master).

The searcher's length (``batches``) is the step count; the trial stops when the searcher says so
through ``should_preempt`` or when it reaches ``max_length`` (the searcher's ``max_time``).
"""

import json
import os
import sys
import time
from pathlib import Path

import stalwart as det


def journal(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    assert info.trial is not None
    hp = info.trial.hparams
    x = float(hp["x"])
    step_seconds = float(hp["step_seconds"])
    period = int(hp["period"])
    max_steps = int(hp["max_steps"])
    run = os.environ["DET_TRIAL_RUN_ID"]
    book = Path(str(hp["journal"])) / f"{info.trial.trial_id}.log"
    with det.core.init() as ctx:
        start = 0
        if info.latest_checkpoint:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = int(json.loads((path / "state.json").read_text())["step"])
        journal(book, f"start {run} {start}")
        step = start
        while step < max_steps:
            step += 1
            time.sleep(step_seconds)
            loss = (x - 0.3) ** 2 + 1.0 / step
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
            journal(book, f"report {run} training {step}")
            if step % period and step != max_steps:
                continue
            ctx.train.report_validation_metrics(
                steps_completed=step, metrics={"loss": loss, "batches": step}
            )
            journal(book, f"report {run} validation {step}")
            with ctx.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                (path / "state.json").write_text(json.dumps({"step": step}))
            journal(book, f"ckpt {run} {step} {uuid}")
            ctx.train.report_progress(step / max_steps)
            if ctx.preempt.should_preempt():
                break
    journal(book, f"end {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
