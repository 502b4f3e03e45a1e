"""A Core API trial for the checkpoint-files tests (runs on the agent's own Python).

Six steps reporting ``loss = 1 / step``; at steps 2, 4 and 6 a validation and a checkpoint holding
``state.json``, ``notes.txt``, ``model/weights.pt`` and ``model/extra.bin``. It also writes a
TensorBoard event file that the Core API uploads to the trial's storage. Prints ``DONE``.
"""

import json

import stalwart as det


def main() -> None:
    with det.core.init() as ctx:
        events = ctx.train.get_tensorboard_path() / "events.out.tfevents.1.stalwart"
        events.write_bytes(b"\0" * 16)
        for step in range(1, 7):
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
            if step % 2:
                continue
            ctx.train.report_validation_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
            with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step}))
                (path / "notes.txt").write_text("notes\n")
                (path / "model").mkdir()
                (path / "model" / "weights.pt").write_bytes(b"w" * 100)
                (path / "model" / "extra.bin").write_bytes(b"x" * 10)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
