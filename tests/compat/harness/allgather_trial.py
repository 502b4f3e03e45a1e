"""One trial, two worker processes, ``allgather`` through the official harness's
``DistributedContext`` (ZMQ, no torch): the script launches its own workers with the standard
torch variables (one per slot), each builds ``DistributedContext.from_torch_distributed()`` and
``core.init(distributed=...)``. Prints ``ALLGATHER rank=R got=[...]`` per worker.
"""

import os
import subprocess
import sys

import determined as det  # type: ignore[import-not-found]  # the det venv has it
from determined import core


def launch() -> int:
    info = det.get_cluster_info()
    assert info is not None
    size = len(info.slot_ids)
    workers = [
        subprocess.Popen(
            [sys.executable, __file__],
            env={
                **os.environ,
                "RANK": str(rank),
                "WORLD_SIZE": str(size),
                "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(size),
                "GROUP_RANK": "0",
                "GROUP_WORLD_SIZE": "1",
            },
        )
        for rank in range(size)
    ]
    codes = [worker.wait() for worker in workers]
    return 0 if codes == [0] * size else 1


def work() -> int:
    distributed = core.DistributedContext.from_torch_distributed(chief_ip="127.0.0.1")
    with core.init(distributed=distributed, tensorboard_mode=core.TensorboardMode.MANUAL) as ctx:
        ranks = ctx.distributed.allgather(ctx.distributed.rank)
        print(f"ALLGATHER rank={ctx.distributed.rank} got={ranks}", flush=True)
        if ctx.distributed.rank == 0:
            total = float(sum(ranks))
            ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": total})
    return 0


if __name__ == "__main__":
    sys.exit(work() if "RANK" in os.environ else launch())
