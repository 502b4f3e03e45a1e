"""``DistributedContext``: who this process is among the trial's workers, and their collectives.

Contract:

- The shape is Determined's: ``rank``/``size``, ``local_rank``/``local_size`` (this node),
  ``cross_rank``/``cross_size`` (nodes), their ``get_*()`` getters, and the collectives
  ``allgather`` (a list in rank order on every worker), ``gather`` (that list on rank 0, None
  elsewhere), ``broadcast`` (rank 0's value everywhere), their ``*_local`` twins among the
  workers of one node (ordered by ``local_rank``, rooted at ``local_rank`` 0), and ``barrier``.
- Values travel pickled through a hub that rank 0 hosts (:mod:`stalwart.core._ipc`) on
  ``pub_port + port_offset`` of ``chief_ip`` (``127.0.0.1`` when there is one node; required
  otherwise). The local groups use a hub per node on a Unix socket (a free loopback port with
  ``force_tcp``), whose address goes round in one global ``allgather`` while the context is
  built; ``pull_port`` is accepted for Determined's signature and not used.
- Building a context with ``size > 1`` blocks until every worker has built its own (at most
  ``setup_timeout_s``). Every worker must then call the collectives in step (the same ones, in
  the same order, from one thread). A worker that crashes, leaves, or calls another collective
  makes the collective raise :class:`~stalwart.core._ipc.CollectiveError` on every worker at
  once; a collective not complete after ``timeout_s`` raises
  :class:`~stalwart.core._ipc.CollectiveTimeoutError`. Nothing waits forever.
- With ``size == 1`` nothing is opened and the collectives are trivial.
- :meth:`DistributedContext.close` (called by ``core.Context.close``) disconnects; idempotent.
- The ``from_*`` constructors read what a launcher sets (through :mod:`stalwart.core.env`);
  none imports torch, DeepSpeed or Horovod.
"""

from __future__ import annotations

from typing import Any

from stalwart.core import env as task_env
from stalwart.core._ipc import Hub, Listener, Spoke, unix_sockets_available

__all__ = [
    "DEFAULT_SETUP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "DistributedContext",
    "DummyDistributedContext",
]

DEFAULT_TIMEOUT_S = 1800.0
"""How long one collective may wait for the others (torch's default process-group timeout)."""
DEFAULT_SETUP_TIMEOUT_S = 600.0
"""How long building a context may wait for every worker to build its own."""

_Channel = Hub | Spoke | None


class _Group:
    """The collectives of one group over its channel (None: a group of one)."""

    def __init__(self, rank: int, channel: _Channel) -> None:
        self.rank = rank
        self.channel = channel

    def allgather(self, stuff: Any) -> list[Any]:
        if isinstance(self.channel, Hub):
            return self.channel.round("allgather", stuff, lambda values: values)
        if isinstance(self.channel, Spoke):
            return list(self.channel.round("allgather", stuff))
        return [stuff]

    def gather(self, stuff: Any) -> list[Any] | None:
        if isinstance(self.channel, Hub):
            return self.channel.round("gather", stuff, lambda _: None)
        if isinstance(self.channel, Spoke):
            self.channel.round("gather", stuff)
            return None
        return [stuff]

    def broadcast(self, stuff: Any) -> Any:
        if isinstance(self.channel, Hub):
            self.channel.round("broadcast", stuff, lambda values: values[0])
            return stuff
        if isinstance(self.channel, Spoke):
            return self.channel.round("broadcast", None)
        return stuff

    def barrier(self) -> None:
        if isinstance(self.channel, Hub):
            self.channel.round("barrier", None, lambda _: None)
        elif isinstance(self.channel, Spoke):
            self.channel.round("barrier", None)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


class DistributedContext:
    """The worker's place in the trial and the collectives between workers (module contract).

    These collectives coordinate the harness and small Python values (metrics, decisions,
    file names); they do not replace the tensor collectives of the training framework.
    """

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
        pub_port: int = task_env.TrainPorts.comm_1,
        pull_port: int = task_env.TrainPorts.comm_2,
        port_offset: int = 0,
        force_tcp: bool = False,
        key: str | bytes = b"",
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        setup_timeout_s: float = DEFAULT_SETUP_TIMEOUT_S,
    ) -> None:
        _check_ranks(rank, size, local_rank, local_size, cross_rank, cross_size)
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        one_node = local_size == size
        if not one_node and not chief_ip:
            raise ValueError(
                f"a DistributedContext across nodes (local_size {local_size} != size {size}) "
                "needs chief_ip, the address of the rank-0 worker (or DET_CHIEF_IP)"
            )
        self._chief_ip = "127.0.0.1" if one_node else str(chief_ip)
        self._port = pub_port + port_offset
        self._force_tcp = force_tcp
        self._key = key.encode() if isinstance(key, str) else key
        self._timeout_s = timeout_s
        self._setup_timeout_s = setup_timeout_s
        self._closed = False
        self._global = _Group(rank, self._join_global(one_node))
        try:
            self._local = self._join_local(one_node)
        except BaseException:
            self._global.close()
            raise

    def _join_global(self, one_node: bool) -> _Channel:
        if self.size == 1:
            return None
        name = f"DistributedContext(size={self.size})"
        if self.rank == 0:
            host = "127.0.0.1" if one_node else ("::" if ":" in self._chief_ip else "0.0.0.0")
            listener = Listener.tcp(host, self._port, advertise=self._chief_ip)
            return Hub(
                listener,
                self.size,
                self._key,
                name=name,
                setup_timeout_s=self._setup_timeout_s,
                timeout_s=self._timeout_s,
            )
        shown = f"[{self._chief_ip}]" if ":" in self._chief_ip else self._chief_ip
        return Spoke(
            f"tcp://{shown}:{self._port}",
            self.rank,
            self._key,
            name=name,
            setup_timeout_s=self._setup_timeout_s,
            timeout_s=self._timeout_s,
        )

    def _join_local(self, one_node: bool) -> _Group:
        if one_node:
            return self._global  # the same workers: the global group serves both
        listener = None
        if self.local_rank == 0 and self.local_size > 1:
            listener = (
                Listener.unix()
                if unix_sockets_available() and not self._force_tcp
                else Listener.tcp("127.0.0.1", 0)
            )
        # Every worker takes part, whatever its node's size, so that all stay in step.
        announced = (self.cross_rank, listener.endpoint) if listener is not None else None
        endpoints = self._global.allgather(announced)
        if self.local_size == 1:
            return _Group(0, None)
        name = f"DistributedContext(node {self.cross_rank}, local_size={self.local_size})"
        if listener is not None:
            return _Group(
                0,
                Hub(
                    listener,
                    self.local_size,
                    self._key,
                    name=name,
                    setup_timeout_s=self._setup_timeout_s,
                    timeout_s=self._timeout_s,
                ),
            )
        mine = [e[1] for e in endpoints if e is not None and e[0] == self.cross_rank]
        if len(mine) != 1:
            raise ValueError(
                f"node {self.cross_rank} has {len(mine)} local chiefs (local_rank 0); check the "
                "ranks given to the DistributedContext"
            )
        return _Group(
            self.local_rank,
            Spoke(
                str(mine[0]),
                self.local_rank,
                self._key,
                name=name,
                setup_timeout_s=self._setup_timeout_s,
                timeout_s=self._timeout_s,
            ),
        )

    @classmethod
    def from_torch_distributed(
        cls, chief_ip: str | None = None, *, timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> DistributedContext:
        """From the variables of ``torch.distributed.run`` (``RANK``, ``WORLD_SIZE``,
        ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``); the chief is
        ``chief_ip``, else ``DET_CHIEF_IP``, else ``MASTER_ADDR``. :class:`KeyError` when the
        variables are missing (scripts catch it to fall back to ``distributed=None``)."""
        return cls._from_env(task_env.torch_launcher_env(), chief_ip, timeout_s)

    @classmethod
    def from_deepspeed(
        cls, chief_ip: str | None = None, *, timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> DistributedContext:
        """From the variables of the DeepSpeed launcher (``RANK``, ``WORLD_SIZE``,
        ``LOCAL_RANK``, ``LOCAL_SIZE``, ``CROSS_RANK``, ``CROSS_SIZE``); the chief as in
        :meth:`from_torch_distributed`. :class:`KeyError` when the variables are missing."""
        return cls._from_env(task_env.deepspeed_launcher_env(), chief_ip, timeout_s)

    @classmethod
    def from_horovod(
        cls, hvd: Any, chief_ip: str | None = None, *, timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> DistributedContext:
        """From an initialized Horovod module (``import horovod.torch as hvd; hvd.init()``);
        the chief is ``chief_ip``, else ``DET_CHIEF_IP``."""
        ranks = task_env.TorchLauncherEnv(
            rank=int(hvd.rank()),
            size=int(hvd.size()),
            local_rank=int(hvd.local_rank()),
            local_size=int(hvd.local_size()),
            cross_rank=int(hvd.cross_rank()),
            cross_size=int(hvd.cross_size()),
        )
        return cls._from_env(ranks, chief_ip, timeout_s)

    @classmethod
    def _from_env(
        cls, ranks: task_env.TorchLauncherEnv, chief_ip: str | None, timeout_s: float | None
    ) -> DistributedContext:
        comm = task_env.comm_env()
        return cls(
            rank=ranks.rank,
            size=ranks.size,
            local_rank=ranks.local_rank,
            local_size=ranks.local_size,
            cross_rank=ranks.cross_rank,
            cross_size=ranks.cross_size,
            chief_ip=chief_ip or comm.chief_ip,
            pub_port=comm.ports.comm_1,
            pull_port=comm.ports.comm_2,
            key=comm.key,
            timeout_s=timeout_s,
        )

    def get_rank(self) -> int:
        """This worker's rank among all workers of the trial."""
        return self.rank

    def get_size(self) -> int:
        """How many workers the trial has."""
        return self.size

    def get_local_rank(self) -> int:
        """This worker's rank among the workers of its node."""
        return self.local_rank

    def get_local_size(self) -> int:
        """How many workers this node has."""
        return self.local_size

    def get_cross_rank(self) -> int:
        """This node's rank among the trial's nodes."""
        return self.cross_rank

    def get_cross_size(self) -> int:
        """How many nodes the trial has."""
        return self.cross_size

    def get_num_agents(self) -> int:
        """How many agents (nodes) the trial runs on."""
        return self.cross_size

    def allgather(self, stuff: Any) -> list[Any]:
        """Every worker's ``stuff``, in rank order, on every worker."""
        return self._global.allgather(stuff)

    def gather(self, stuff: Any) -> list[Any] | None:
        """Every worker's ``stuff`` in rank order on the chief; None on the others."""
        return self._global.gather(stuff)

    def broadcast(self, stuff: Any) -> Any:
        """The chief's ``stuff`` on every worker (the others' argument is ignored)."""
        return self._global.broadcast(stuff)

    def allgather_local(self, stuff: Any) -> list[Any]:
        """:meth:`allgather` among the workers of this node, in local-rank order."""
        return self._local.allgather(stuff)

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """:meth:`gather` to the local chief (``local_rank`` 0); None on the others."""
        return self._local.gather(stuff)

    def broadcast_local(self, stuff: Any = None) -> Any:
        """:meth:`broadcast` from the local chief."""
        return self._local.broadcast(stuff)

    def barrier(self) -> None:
        """Return once every worker has called it."""
        self._global.barrier()

    def close(self) -> None:
        """Disconnect from the other workers (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._local is not self._global:
                self._local.close()
        finally:
            self._global.close()


def _check_ranks(
    rank: int, size: int, local_rank: int, local_size: int, cross_rank: int, cross_size: int
) -> None:
    if not 0 <= rank < size:
        raise ValueError(f"rank must be in [0, size), got rank={rank} size={size}")
    if not 0 <= local_rank < local_size:
        raise ValueError(f"local_rank must be in [0, local_size), got {local_rank} of {local_size}")
    if not 0 <= cross_rank < cross_size:
        raise ValueError(f"cross_rank must be in [0, cross_size), got {cross_rank} of {cross_size}")
    if local_size > size:
        raise ValueError(f"local_size ({local_size}) cannot exceed size ({size})")
    if local_size == size and (local_rank != rank or cross_size != 1):
        raise ValueError(
            "with every worker on one node (local_size == size), local_rank must equal rank "
            f"and cross_size must be 1; got rank={rank} local_rank={local_rank} "
            f"cross_size={cross_size}"
        )


class DummyDistributedContext(DistributedContext):
    """Rank 0 of 1: what ``core.init`` uses when no ``distributed`` is given."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
