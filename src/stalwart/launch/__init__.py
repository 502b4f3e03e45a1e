"""Launch layers: the commands a trial's entrypoint puts in front of a training script so that
it runs as several processes, as Determined's ``determined.launch`` does.

- :mod:`stalwart.launch.torch_distributed`: ``python3 -m stalwart.launch.torch_distributed
  python3 train.py`` runs ``torch.distributed.run`` with one worker per slot of the container
  and the trial's containers as its nodes.
- :mod:`stalwart.launch.deepspeed`: DeepSpeed's per-node launcher in every container, the
  trial's containers and slots as its world (no ssh between containers).
- :mod:`stalwart.launch.horovod`: ``horovodrun`` in a trial of one container.
- :mod:`stalwart.launch.wrap_rank`: runs one worker, prefixing its output lines with
  ``[rank=N] `` (the agent turns that prefix into the log entry's rank).

Nothing here imports torch, DeepSpeed or Horovod: the launchers run them as commands.
"""

from __future__ import annotations

__all__: list[str] = []
