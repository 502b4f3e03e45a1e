"""``DistributedContext``: who this process is among the trial's workers, and their collectives.

Contract:

- The shape is Determined's: ``rank``/``size``, ``local_rank``/``local_size`` (this node),
  ``cross_rank``/``cross_size`` (nodes), their ``get_*()`` getters, and the collectives
  ``allgather``, ``gather``, ``broadcast`` (and ``*_local`` twins for one node) plus ``barrier``.
- Every worker must call a collective in step with the others (the same order, the same calls).
- Today only one process is supported: with ``size == 1`` the collectives are local and trivial
  (``allgather(x) == [x]``, ``gather(x) == [x]`` on the chief, ``broadcast(x) == x``). Building a
  context with ``size > 1`` works (so ranks can be inspected), but its collectives raise
  :class:`NotImplementedError` until multi-process communication lands.
"""

from __future__ import annotations

from typing import Any

from stalwart.core.env import torch_launcher_env

__all__ = ["DistributedContext", "DummyDistributedContext"]


class DistributedContext:
    """The worker's place in the trial and the collectives between workers (module contract)."""

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        cross_size: int,
        chief_ip: str | None = None,
        pub_port: int = 12360,
        pull_port: int = 12376,
        port_offset: int = 0,
        force_tcp: bool = False,
    ) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank must be in [0, size), got rank={rank} size={size}")
        if not 0 <= local_rank < local_size:
            raise ValueError(
                f"local_rank must be in [0, local_size), got {local_rank} of {local_size}"
            )
        if not 0 <= cross_rank < cross_size:
            raise ValueError(
                f"cross_rank must be in [0, cross_size), got {cross_rank} of {cross_size}"
            )
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self._chief_ip = chief_ip
        self._ports = (pub_port + port_offset, pull_port + port_offset)
        self._force_tcp = force_tcp

    @classmethod
    def from_torch_distributed(cls, chief_ip: str | None = None) -> DistributedContext:
        """From the variables of ``torch.distributed.run``; :class:`KeyError` when they are
        missing (scripts catch it to fall back to ``distributed=None``)."""
        env = torch_launcher_env()
        return cls(
            rank=env.rank,
            size=env.size,
            local_rank=env.local_rank,
            local_size=env.local_size,
            cross_rank=env.cross_rank,
            cross_size=env.cross_size,
            chief_ip=chief_ip,
        )

    def get_rank(self) -> int:
        return self.rank

    def get_size(self) -> int:
        return self.size

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_size(self) -> int:
        return self.local_size

    def get_cross_rank(self) -> int:
        return self.cross_rank

    def get_cross_size(self) -> int:
        return self.cross_size

    def _single(self, what: str, size: int) -> None:
        if size != 1:
            raise NotImplementedError(
                f"DistributedContext.{what}() across {size} processes is not supported by "
                "stalwart.core yet; run one process per trial (slots_per_trial: 1)"
            )

    def allgather(self, stuff: Any) -> list[Any]:
        """Every worker's ``stuff``, in rank order, on every worker."""
        self._single("allgather", self.size)
        return [stuff]

    def gather(self, stuff: Any) -> list[Any] | None:
        """Every worker's ``stuff`` in rank order on the chief; None on the others."""
        self._single("gather", self.size)
        return [stuff] if self.rank == 0 else None

    def broadcast(self, stuff: Any) -> Any:
        """The chief's ``stuff`` on every worker (the others' argument is ignored)."""
        self._single("broadcast", self.size)
        return stuff

    def allgather_local(self, stuff: Any) -> list[Any]:
        """:meth:`allgather` among the workers of this node."""
        self._single("allgather_local", self.local_size)
        return [stuff]

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """:meth:`gather` to the local chief."""
        self._single("gather_local", self.local_size)
        return [stuff] if self.local_rank == 0 else None

    def broadcast_local(self, stuff: Any) -> Any:
        """:meth:`broadcast` from the local chief."""
        self._single("broadcast_local", self.local_size)
        return stuff

    def barrier(self) -> None:
        """Return once every worker has called it."""
        self._single("barrier", self.size)

    def close(self) -> None:
        """Release the communication channels (none for one process)."""


class DummyDistributedContext(DistributedContext):
    """Rank 0 of 1: what ``core.init`` uses when no ``distributed`` is given."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
