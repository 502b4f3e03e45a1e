"""Stage 4: distributed training, by hand, with ``allgather``.

Stage 3, run by several workers at once (``resources.slots_per_trial: 2`` in
``4_distributed.yaml``). The launch layer in the config's entrypoint,
``python3 -m stalwart.launch.torch_distributed``, starts one process per slot through PyTorch's
``torch.distributed.run`` (so PyTorch must be installed; this script itself does not use it).

Data parallelism in three lines: every worker computes the gradient on its share of each batch,
``allgather`` hands every worker all the shares' results, and each applies their average, so all
workers keep the same model. The chief (rank 0) reports metrics and stores checkpoints alone;
every worker asks ``should_preempt()`` (the chief asks the master and tells the others).

Off-cluster, ``python3 4_distributed.py`` runs one worker, and
``torchrun --nproc_per_node 2 4_distributed.py`` runs two.
Lines marked ``NEW`` are what changed since stage 3.
"""

import json
import pathlib
import random
import time
from typing import Any

import stalwart as det

VALIDATION_PERIOD = 10
BATCH_SECONDS = 0.05

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


# NEW: the average of every worker's result, each weighted by the number of points it saw.
def average(results: list[tuple[Model, float, int]]) -> tuple[Model, float]:
    total = sum(n for _, _, n in results)
    grad = {name: sum(g[name] * n for g, _, n in results) / total for name in ("w", "b")}
    loss = sum(loss * n for _, loss, n in results) / total
    return grad, loss


def main(
    core_context: det.core.Context, hparams: dict[str, Any], latest_checkpoint: str | None
) -> None:
    # NEW: who this worker is, among how many.
    rank, size = core_context.distributed.rank, core_context.distributed.size
    lr, batch_size, batches = hparams["lr"], hparams["batch_size"], hparams["batches"]
    train_data, validation_data = make_data(1000, seed=0), make_data(200, seed=1)
    model = {"w": 0.0, "b": 0.0}
    first_batch = 0
    if latest_checkpoint is not None:
        # Every worker restores (the workers of a node share one download).
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            model, first_batch = load_state(path)
    print(f"worker {rank} of {size} starts at batch {first_batch}")
    for batch in range(first_batch, batches):
        time.sleep(BATCH_SECONDS)
        # NEW: this worker's share of the batch: every size-th point, starting at its rank.
        shard = batch_at(train_data, batch, batch_size)[rank::size]
        grad, loss = gradients(model, shard)
        # NEW: every worker gets every worker's (gradient, loss, points), in rank order, and
        # applies the same average, so the workers' models stay identical.
        grad, loss = average(core_context.distributed.allgather((grad, loss, len(shard))))
        for name in model:
            model[name] -= lr * grad[name]
        batches_completed = batch + 1
        # NEW: the chief reports for everyone.
        if rank == 0:
            core_context.train.report_training_metrics(
                steps_completed=batches_completed, metrics={"loss": loss}
            )
        if batches_completed % VALIDATION_PERIOD == 0 or batches_completed == batches:
            # NEW: validation is shared out the same way.
            shard = validation_data[rank::size]
            results = core_context.distributed.allgather((evaluate(model, shard), len(shard)))
            validation_loss = sum(v * n for v, n in results) / len(validation_data)
            if rank == 0:
                core_context.train.report_validation_metrics(
                    steps_completed=batches_completed,
                    metrics={"loss": validation_loss, "batches": batches_completed},
                )
                core_context.train.report_progress(batches_completed / batches)
                # NEW: only the chief stores the checkpoint (all workers hold the same model).
                metadata = {"steps_completed": batches_completed}
                with core_context.checkpoint.store_path(metadata) as (path, _):
                    save_state(path, model, batches_completed)
            # Every worker must ask: the chief asks the master and tells the others.
            if core_context.preempt.should_preempt():
                print(f"worker {rank} stopped after batch {batches_completed}")
                return
    print(f"worker {rank} done: w = {model['w']:.6f}, b = {model['b']:.6f}")


if __name__ == "__main__":
    info = det.get_cluster_info()
    if info is not None:
        hparams, latest_checkpoint = info.trial.hparams, info.latest_checkpoint
    else:
        hparams, latest_checkpoint = DEFAULT_HPARAMS, None
    # NEW: the workers' ranks and the chief's address, from what torch.distributed.run set.
    # Without a launcher (`python3 4_distributed.py`) there are none: run as the only worker.
    distributed: det.core.DistributedContext | None
    try:
        distributed = det.core.DistributedContext.from_torch_distributed()
    except KeyError:
        distributed = None
    with det.core.init(distributed=distributed) as core_context:
        main(core_context, hparams, latest_checkpoint)
