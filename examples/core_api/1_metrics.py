"""Stage 1: report metrics to Stalwart.

Stage 0's loop, plus the Core API: ``det.core.init()`` gives a context whose ``train`` part
reports training and validation metrics. On a cluster they go to the master (the web UI's charts,
``stalwart e describe ID --metrics``); off-cluster (``python3 1_metrics.py``) the same calls print
them, so the script runs anywhere. Lines marked ``NEW`` are what changed since stage 0.
"""

import random

import stalwart as det  # NEW: on Determined, `import determined as det`; nothing else changes.

BATCHES = 100
BATCH_SIZE = 16
LR = 0.1
VALIDATION_PERIOD = 10

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


# NEW: the loop takes the Core API context.
def main(core_context: det.core.Context) -> None:
    train_data, validation_data = make_data(1000, seed=0), make_data(200, seed=1)
    model = {"w": 0.0, "b": 0.0}
    for batch in range(BATCHES):
        grad, loss = gradients(model, batch_at(train_data, batch, BATCH_SIZE))
        for name in model:
            model[name] -= LR * grad[name]
        batches_completed = batch + 1
        # NEW: report the training loss of every batch. `steps_completed` is the x axis of the
        # charts; it must grow from one report to the next.
        core_context.train.report_training_metrics(
            steps_completed=batches_completed, metrics={"loss": loss}
        )
        if batches_completed % VALIDATION_PERIOD == 0:
            # NEW: validation metrics are what searchers read (the config's `searcher.metric`).
            core_context.train.report_validation_metrics(
                steps_completed=batches_completed,
                metrics={"loss": evaluate(model, validation_data)},
            )
    print(f"done: w = {model['w']:.3f}, b = {model['b']:.3f}")


if __name__ == "__main__":
    # NEW: the context talks to the master on a cluster and prints off-cluster. Leaving the
    # `with` block flushes the metrics still queued.
    with det.core.init() as core_context:
        main(core_context)
