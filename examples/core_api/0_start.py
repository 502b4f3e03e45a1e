"""Stage 0: a plain training loop, with no Stalwart in it yet.

The model fits a line, ``y = w * x + b``, to noisy points near ``y = 3x + 2`` by stochastic
gradient descent. It is plain Python, so the tutorial needs nothing but Python; the loop has the
shape of any training loop (take a batch, compute the gradients, step, now and then validate).

Run it off-cluster with ``python3 0_start.py``, or on a cluster as it is
(``stalwart e create 0_start.yaml . -f``): Stalwart runs the entrypoint and keeps what it
prints as the trial's logs. Stage 1 reports the losses as metrics instead of printing them.
"""

import random

BATCHES = 100  # how long to train
BATCH_SIZE = 16
LR = 0.1  # the learning rate
VALIDATION_PERIOD = 10  # validate every this many batches

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


def main() -> None:
    train_data, validation_data = make_data(1000, seed=0), make_data(200, seed=1)
    model = {"w": 0.0, "b": 0.0}
    for batch in range(BATCHES):
        grad, loss = gradients(model, batch_at(train_data, batch, BATCH_SIZE))
        for name in model:
            model[name] -= LR * grad[name]
        batches_completed = batch + 1
        if batches_completed % VALIDATION_PERIOD == 0:
            validation_loss = evaluate(model, validation_data)
            print(
                f"batch {batches_completed}: training loss {loss:.4f}, "
                f"validation loss {validation_loss:.4f}"
            )
    print(f"done: w = {model['w']:.3f}, b = {model['b']:.3f}")


if __name__ == "__main__":
    main()
