"""A Core API trial that writes TensorBoard events (for ``det tensorboard`` tests).

It writes a scalar ``loss`` at three steps into ``get_tensorboard_path()`` with TensorBoard's
own event writer and reports the same metrics: the Core API (AUTO mode) uploads the event file
to the trial's storage, where a TensorBoard task finds it.
"""

from tensorboard.compat.proto import event_pb2, summary_pb2  # type: ignore[import-untyped]
from tensorboard.summary.writer.event_file_writer import (  # type: ignore[import-untyped]
    EventFileWriter,
)

import stalwart as det


def main() -> None:
    with det.core.init() as ctx:
        writer = EventFileWriter(str(ctx.train.get_tensorboard_path()))
        for step in (1, 2, 3):
            value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / step)
            writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=[value])))
            writer.flush()
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        writer.close()
        ctx.train.report_validation_metrics(steps_completed=3, metrics={"loss": 1.0 / 3})
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
