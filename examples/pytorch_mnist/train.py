"""Train a small CNN on MNIST-like digits with PyTorch and the Core API.

One script serves every config of this directory:

- ``const.yaml``: one trial with fixed hyperparameters;
- ``adaptive.yaml``: an adaptive ASHA search over them;
- ``distributed.yaml``: one trial on two slots, launched by ``stalwart.launch.torch_distributed``
  (PyTorch DDP: each worker trains on its share of every batch and DDP averages the gradients).

The script reports training and validation metrics, stores a checkpoint at every validation,
resumes from the latest one when the trial starts again, and stops when asked to (a pause, or
the searcher ending a poor trial). Off-cluster, ``python3 train.py`` trains once with
``DEFAULT_HPARAMS`` (metrics are printed, checkpoints go to ``./checkpoints``), and
``torchrun --nproc_per_node 2 train.py`` trains with two workers.

The data set is made on the spot (``data.py``): nothing is downloaded.
"""

import logging
import pathlib
from typing import Any

import torch
import torch.distributed as tdist
from data import make_digits
from model import build_model
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel

import stalwart as det

# The hyperparameters of an off-cluster run; on a cluster they come from the config.
DEFAULT_HPARAMS: dict[str, Any] = {
    "learning_rate": 0.001,
    "n_filters1": 16,
    "n_filters2": 32,
    "dropout1": 0.25,
    "dropout2": 0.5,
    "global_batch_size": 64,  # split between the workers
    "train_batches": 300,  # the training length, in (global) batches
    "validation_period": 100,  # validate and checkpoint every this many batches
}
TRAIN_SIZE, VALIDATION_SIZE = 6000, 1000
REPORT_PERIOD = 10  # report the training loss every this many batches


def batch_indices(step: int, batch_size: int, rank: int, size: int) -> torch.Tensor:
    """The indices of the training images of this worker's share of batch ``step``.

    An epoch is one pass over the data in a shuffled order. The order depends only on the
    epoch, so every worker agrees on it, and a trial that resumes at batch ``step`` sees the
    batches it would have seen had it never stopped.
    """
    per_epoch = TRAIN_SIZE // batch_size
    epoch, index = divmod(step, per_epoch)
    order = torch.randperm(TRAIN_SIZE, generator=torch.Generator().manual_seed(epoch))
    return order[index * batch_size : (index + 1) * batch_size][rank::size]


@torch.no_grad()
def validate(
    core_context: det.core.Context,
    model: torch.nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    device: torch.device,
) -> dict[str, float]:
    """The loss and the accuracy on the validation set; each worker scores its share and
    ``allgather`` adds the shares up, so every worker gets the same numbers."""
    dist = core_context.distributed
    model.eval()
    images, labels = images[dist.rank :: dist.size], labels[dist.rank :: dist.size]
    loss_sum, correct = 0.0, 0
    for start in range(0, len(images), 500):
        x, y = images[start : start + 500].to(device), labels[start : start + 500].to(device)
        scores = model(x)
        loss_sum += functional.cross_entropy(scores, y, reduction="sum").item()
        correct += int((scores.argmax(dim=1) == y).sum().item())
    shares = dist.allgather((loss_sum, correct, len(images)))
    count = sum(n for _, _, n in shares)
    return {
        "validation_loss": sum(loss for loss, _, _ in shares) / count,
        "accuracy": sum(c for _, c, _ in shares) / count,
    }


def train(
    core_context: det.core.Context,
    hparams: dict[str, Any],
    latest_checkpoint: str | None,
    device: torch.device,
) -> None:
    """Train to ``hparams["train_batches"]``, or until asked to stop."""
    dist = core_context.distributed
    logging.info("worker %d of %d, training on %s", dist.rank, dist.size, device)
    torch.manual_seed(0)  # the same initial weights on every worker
    net = build_model(hparams).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=float(hparams["learning_rate"]))
    # DDP averages the gradients of the workers in backward(), so their weights stay equal.
    model = DistributedDataParallel(net) if dist.size > 1 else net
    train_images, train_labels = make_digits(TRAIN_SIZE, seed=0)
    validation_images, validation_labels = make_digits(VALIDATION_SIZE, seed=1)
    batch_size = int(hparams["global_batch_size"])
    total, period = int(hparams["train_batches"]), int(hparams["validation_period"])

    step = 0
    if latest_checkpoint is not None:
        # Resume: the weights, the optimizer's state and how far training got.
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            state = torch.load(path / "checkpoint.pt", map_location=device, weights_only=True)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["batches"])
        logging.info("resumed from checkpoint %s at batch %d", latest_checkpoint, step)

    losses: list[float] = []
    while step < total:
        model.train()
        indices = batch_indices(step, batch_size, dist.rank, dist.size)
        x, y = train_images[indices].to(device), train_labels[indices].to(device)
        loss = functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        losses.append(loss.item())
        step += 1

        if step % REPORT_PERIOD == 0 or step == total:
            # The mean loss of the last batches, over all workers; the chief reports it.
            shares = dist.allgather(losses)
            mean_loss = sum(sum(s) for s in shares) / sum(len(s) for s in shares)
            losses = []
            if dist.rank == 0:
                core_context.train.report_training_metrics(
                    steps_completed=step, metrics={"loss": mean_loss}
                )

        if step % period == 0 or step == total:
            metrics = validate(core_context, model, validation_images, validation_labels, device)
            if dist.rank == 0:
                # `batches` is the time_metric of adaptive.yaml's searcher.
                core_context.train.report_validation_metrics(
                    steps_completed=step, metrics={**metrics, "batches": step}
                )
                core_context.train.report_progress(step / total)
                # Only the chief stores checkpoints: every worker has the same weights.
                with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    state = {
                        "model": net.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "batches": step,
                    }
                    torch.save(state, pathlib.Path(path) / "checkpoint.pt")
            # Every worker asks (the chief asks the master and tells the others).
            if core_context.preempt.should_preempt():
                logging.info("stopping after batch %d, as asked", step)
                return


def main() -> None:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    if info is not None:
        hparams, latest_checkpoint = info.trial.hparams, info.latest_checkpoint
    else:
        hparams, latest_checkpoint = DEFAULT_HPARAMS, None

    # Launched by torch.distributed.run (distributed.yaml, or torchrun off-cluster), the
    # workers' ranks are in the environment; otherwise this is the only worker.
    try:
        distributed = det.core.DistributedContext.from_torch_distributed()
    except KeyError:
        distributed = None
    device = torch.device("cpu")
    if torch.cuda.is_available():
        device = torch.device("cuda", distributed.local_rank if distributed else 0)
        torch.cuda.set_device(device)
    if distributed is not None:
        tdist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    try:
        with det.core.init(distributed=distributed) as core_context:
            train(core_context, hparams, latest_checkpoint, device)
    finally:
        if distributed is not None:
            tdist.destroy_process_group()


if __name__ == "__main__":
    main()
