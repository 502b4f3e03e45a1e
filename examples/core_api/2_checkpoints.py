"""Stage 2: checkpoints, and stopping when asked to (preemption).

Stage 1, plus:

- every validation also saves a checkpoint (the model and how far training got);
- a trial that starts again (after a pause, a failure or a master restart) resumes from its
  latest checkpoint instead of starting over;
- after each checkpoint the script asks whether it should stop (``preempt.should_preempt()``):
  pausing the experiment, a searcher that stops the trial, or a scheduler that needs the slots
  for someone else all ask it to. It stops right after a checkpoint, so nothing is lost.

Try it: ``stalwart e create 2_checkpoints.yaml . -f``, then ``stalwart e pause ID`` while it
runs, and ``stalwart e activate ID``: the logs say where it resumed. Each batch sleeps
``BATCH_SECONDS`` (a stand-in for real work) so that there is time to do that. Off-cluster
(``python3 2_checkpoints.py``) checkpoints go to ``./checkpoints`` and nothing asks it to stop.
Lines marked ``NEW`` are what changed since stage 1.
"""

import json
import pathlib
import random
import time

import stalwart as det

BATCHES = 100
BATCH_SIZE = 16
LR = 0.1
VALIDATION_PERIOD = 10
BATCH_SECONDS = 0.05  # NEW: a stand-in for the time a real batch takes

Model = dict[str, float]
Points = list[tuple[float, float]]


def make_data(n: int, seed: int) -> Points:
    """``n`` points near the line y = 3x + 2; the same points every run for a given seed."""
    rng = random.Random(seed)
    points = []
    for _ in range(n):
        x = rng.uniform(-1.0, 1.0)
        points.append((x, 3.0 * x + 2.0 + rng.gauss(0.0, 0.1)))
    return points


def batch_at(data: Points, index: int, size: int) -> Points:
    """The ``index``-th batch: the data taken in order, wrapping around at the end."""
    start = index * size
    return [data[(start + k) % len(data)] for k in range(size)]


def gradients(model: Model, batch: Points) -> tuple[Model, float]:
    """The gradient of the mean squared error over ``batch``, and that error."""
    grad = {"w": 0.0, "b": 0.0}
    loss = 0.0
    for x, y in batch:
        error = model["w"] * x + model["b"] - y
        grad["w"] += 2.0 * error * x / len(batch)
        grad["b"] += 2.0 * error / len(batch)
        loss += error * error / len(batch)
    return grad, loss


def evaluate(model: Model, data: Points) -> float:
    """The mean squared error over ``data``."""
    return sum((model["w"] * x + model["b"] - y) ** 2 for x, y in data) / len(data)


# NEW: save and load a checkpoint: a directory with whatever files training needs to go on.
def save_state(path: pathlib.Path, model: Model, batches_completed: int) -> None:
    state = {"model": model, "batches_completed": batches_completed}
    (path / "state.json").write_text(json.dumps(state))


def load_state(path: pathlib.Path) -> tuple[Model, int]:
    state = json.loads((path / "state.json").read_text())
    return state["model"], state["batches_completed"]


def main(core_context: det.core.Context, latest_checkpoint: str | None) -> None:
    train_data, validation_data = make_data(1000, seed=0), make_data(200, seed=1)
    model = {"w": 0.0, "b": 0.0}
    first_batch = 0
    # NEW: resume from the latest checkpoint, if this trial has one. `restore_path` makes the
    # checkpoint's files available in a local directory for the duration of the block.
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            model, first_batch = load_state(path)
        print(f"resuming from checkpoint {latest_checkpoint} at batch {first_batch}")
    for batch in range(first_batch, BATCHES):
        time.sleep(BATCH_SECONDS)
        grad, loss = gradients(model, batch_at(train_data, batch, BATCH_SIZE))
        for name in model:
            model[name] -= LR * grad[name]
        batches_completed = batch + 1
        core_context.train.report_training_metrics(
            steps_completed=batches_completed, metrics={"loss": loss}
        )
        if batches_completed % VALIDATION_PERIOD == 0:
            core_context.train.report_validation_metrics(
                steps_completed=batches_completed,
                metrics={"loss": evaluate(model, validation_data)},
            )
            # NEW: store a checkpoint. Write files into `path`; when the block ends, Stalwart
            # stores them in the experiment's checkpoint storage and records the checkpoint
            # with its metadata (`steps_completed` is how the web UI and the CLI place it).
            metadata = {"steps_completed": batches_completed}
            with core_context.checkpoint.store_path(metadata) as (path, storage_id):
                save_state(path, model, batches_completed)
            # NEW: stop if asked to. Return normally: the exit code 0 tells Stalwart the trial
            # stopped where it was told to, and it resumes from `storage_id` when it runs again.
            if core_context.preempt.should_preempt():
                print(f"preempted after batch {batches_completed} (checkpoint {storage_id})")
                return
    print(f"done: w = {model['w']:.3f}, b = {model['b']:.3f}")


if __name__ == "__main__":
    # NEW: what the cluster knows about this task; None off-cluster.
    info = det.get_cluster_info()
    latest_checkpoint = info.latest_checkpoint if info is not None else None
    with det.core.init() as core_context:
        main(core_context, latest_checkpoint)
