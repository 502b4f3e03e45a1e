"""Stage 3: a hyperparameter search (adaptive ASHA).

Stage 2, with its hyperparameters read from the experiment config instead of constants. The
config (``3_hpsearch.yaml``) gives ranges, and the ``adaptive_asha`` searcher starts trials with
values drawn from them. Each trial reports how far it got in the searcher's ``time_metric``
(here ``batches``) with its validation metrics; the searcher compares trials at the same point
and stops the poor ones early by asking them to stop, which the script already honours
(``preempt.should_preempt()``, stage 2). The best trials train to the end.

Run it: ``stalwart e create 3_hpsearch.yaml .``, then ``stalwart e describe ID``. Off-cluster
(``python3 3_hpsearch.py``) it trains once with ``DEFAULT_HPARAMS``.
Lines marked ``NEW`` are what changed since stage 2.
"""

import json
import pathlib
import random
import time
from typing import Any

import stalwart as det

VALIDATION_PERIOD = 10
BATCH_SECONDS = 0.05

# NEW: the hyperparameters of an off-cluster run. On a cluster they come from the config.
DEFAULT_HPARAMS: dict[str, Any] = {"lr": 0.1, "batch_size": 16, "batches": 100}

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


def save_state(path: pathlib.Path, model: Model, batches_completed: int) -> None:
    state = {"model": model, "batches_completed": batches_completed}
    (path / "state.json").write_text(json.dumps(state))


def load_state(path: pathlib.Path) -> tuple[Model, int]:
    state = json.loads((path / "state.json").read_text())
    return state["model"], state["batches_completed"]


# NEW: the hyperparameters come in as an argument.
def main(
    core_context: det.core.Context, hparams: dict[str, Any], latest_checkpoint: str | None
) -> None:
    lr, batch_size, batches = hparams["lr"], hparams["batch_size"], hparams["batches"]
    train_data, validation_data = make_data(1000, seed=0), make_data(200, seed=1)
    model = {"w": 0.0, "b": 0.0}
    first_batch = 0
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            model, first_batch = load_state(path)
        print(f"resuming from checkpoint {latest_checkpoint} at batch {first_batch}")
    for batch in range(first_batch, batches):
        time.sleep(BATCH_SECONDS)
        grad, loss = gradients(model, batch_at(train_data, batch, batch_size))
        for name in model:
            model[name] -= lr * grad[name]
        batches_completed = batch + 1
        core_context.train.report_training_metrics(
            steps_completed=batches_completed, metrics={"loss": loss}
        )
        if batches_completed % VALIDATION_PERIOD == 0 or batches_completed == batches:
            # NEW: `batches` is the searcher's time_metric: how far this trial has trained.
            core_context.train.report_validation_metrics(
                steps_completed=batches_completed,
                metrics={"loss": evaluate(model, validation_data), "batches": batches_completed},
            )
            # NEW: the progress bar of the trial in the web UI and the CLI (0 to 1).
            core_context.train.report_progress(batches_completed / batches)
            metadata = {"steps_completed": batches_completed}
            with core_context.checkpoint.store_path(metadata) as (path, storage_id):
                save_state(path, model, batches_completed)
            # The searcher stops a trial by asking it to stop, like a pause does.
            if core_context.preempt.should_preempt():
                print(f"stopped after batch {batches_completed} (checkpoint {storage_id})")
                return
    print(f"done: w = {model['w']:.3f}, b = {model['b']:.3f}")


if __name__ == "__main__":
    info = det.get_cluster_info()
    if info is not None:
        # NEW: this trial's values, drawn by the searcher from the config's ranges.
        hparams = info.trial.hparams
        latest_checkpoint = info.latest_checkpoint
    else:
        hparams, latest_checkpoint = DEFAULT_HPARAMS, None
    with det.core.init() as core_context:
        main(core_context, hparams, latest_checkpoint)
