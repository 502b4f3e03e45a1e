"""A distributed Core API trial for the integration tests: one real PyTorch DDP step on CPU.

Launched as ``python3 -m stalwart.launch.torch_distributed python3 train_ddp.py`` with
``slots_per_trial: 2``: two processes join a gloo process group, take one DDP step on different
data (DDP averages the gradients, so both replicas end with the same weights), and compare
notes through ``DistributedContext.allgather``. The chief reports the result as metrics and
saves a checkpoint; every rank asks about preemption (the chief asks the master and tells the
others).
"""

import sys

import torch
import torch.distributed as tdist
from torch.nn.parallel import DistributedDataParallel

import stalwart as det


def main() -> int:
    tdist.init_process_group("gloo")
    dist = det.core.DistributedContext.from_torch_distributed()
    rank, size = dist.get_rank(), dist.get_size()
    assert (tdist.get_rank(), tdist.get_world_size()) == (rank, size)
    info = det.get_cluster_info()
    assert info is not None
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts them)
    model = torch.nn.Linear(4, 1)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    with det.core.init(distributed=dist) as ctx:
        torch.manual_seed(1 + rank)  # different data on each rank
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        weights = [round(float(w), 6) for w in model.weight.detach().flatten()]
        notes = dist.allgather(
            {"rank": rank, "agent": info.agent_id, "loss": loss.item(), "weights": weights}
        )
        ranks = [n["rank"] for n in notes]
        in_step = all(n["weights"] == notes[0]["weights"] for n in notes)
        print(
            f"rank {rank} of {size} on agent {info.agent_id}: allgather ranks {ranks} "
            f"agents {[n['agent'] for n in notes]} replicas in step {in_step}",
            flush=True,
        )
        if rank == 0:
            mean_loss = sum(n["loss"] for n in notes) / len(notes)
            metrics = {"loss": mean_loss, "world_size": len(notes), "ranks_sum": sum(ranks)}
            ctx.train.report_training_metrics(
                steps_completed=1, metrics={**metrics, "replicas_in_step": float(in_step)}
            )
            ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": mean_loss})
            with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, _uuid):
                torch.save(model.state_dict(), path / "model.pt")
        if ctx.preempt.should_preempt():
            print(f"rank {rank} preempted", flush=True)
        dist.barrier()
    tdist.destroy_process_group()
    return 0 if in_step else 1


if __name__ == "__main__":
    sys.exit(main())
