"""The resource-manager seam: what the cluster loop and the API ask of an engine.

A resource manager runs allocations on one engine: Stalwart's own agents
(:mod:`stalwart.master.rm.agent`), a batch system (:mod:`stalwart.master.rm.hpc`: Slurm, PBS) or
Kubernetes (:mod:`stalwart.master.rm.kubernetes`). The master builds exactly one, from
``resource_manager`` in its config (:func:`~stalwart.master.rm.build.build_resource_manager`),
and holds it on :attr:`MasterState.rm <stalwart.master.state.MasterState.rm>`. Nothing outside
``rm/`` names a concrete manager: the loop calls :class:`ResourceManager`'s methods, and the API
asks for a capability with ``isinstance`` (never "not supported").

The database is the truth. An allocation is claimed (PENDING -> ASSIGNED, container rows with
their task specs: :mod:`stalwart.master.rm.claim`), the engine runs its containers, and the
manager records what the engine says on the container rows through
:func:`~stalwart.master.transitions.set_container_state`. The cluster loop ends an allocation
once all its containers exited, on every engine alike.

**The state lock** (:attr:`MasterState.lifecycle <stalwart.master.state.MasterState.lifecycle>`):
the loop calls :meth:`ResourceManager.sync` and :meth:`ResourceManager.schedule` *without* it.
A manager takes it only around database work, through :meth:`ResourceManager.step`, and never
holds it during an engine call (a subprocess, an HTTP request, a wait): fetch rows in one
step, call the engine with no lock and no transaction, apply the result in another step,
re-checking the rows (the allocation may have been killed meanwhile; then drop the result).
So a hung ``sbatch`` or a throttled Kubernetes API delays only its own submissions: pausing,
killing and agent syncs are answered all the while.

A new engine is one folder under ``rm/`` with a :class:`ResourceManager` subclass and a settings
class added to the ``resource_manager`` union (:mod:`stalwart.master.rm.settings`); see
``docs/contributing/resource-managers.md``.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from stalwart.agent.protocol import DeviceType
from stalwart.master.cluster.lifecycle import TrialExit
from stalwart.master.services.agents import PoolView

if TYPE_CHECKING:
    from stalwart.environments.prepull import PrepullSettings
    from stalwart.master.state import MasterState

__all__ = [
    "BatchLauncher",
    "EnginePool",
    "EnginePools",
    "Prepull",
    "Reattaches",
    "ResourceManager",
    "ServiceAddresses",
]


class ResourceManager(ABC):
    """An engine as the cluster loop sees it: two calls a round, both without the state lock.

    ``name`` is how users and logs call the engine (``agents``, ``Slurm``, ``PBS``,
    ``Kubernetes``).
    """

    name: str = ""

    queues_successors: bool = False
    """Whether the engine can queue an allocation behind a running one on the same slots, to
    start the moment the running one exits (Stalwart's agents: ``TaskSpec.after``). With
    ``cluster.queue_successors`` on, random and grid searches then create their next trials
    ahead of the exits that make room for them (:meth:`stalwart.master.searcher.base.
    SearchMethod.allow_ahead`)."""

    def __init__(self, state: MasterState) -> None:
        self.state = state

    @contextlib.contextmanager
    def step(self) -> Iterator[Session]:
        """A short database step under the state lock (see the module docstring). Commit in
        the block what must be kept; no engine call inside."""
        with self.state.step() as session:
            yield session

    @abstractmethod
    def sync(self) -> list[TrialExit]:
        """Learn what the engine did since the last round and record it.

        Called by the loop's thread once per round, before the loop ends the allocations whose
        containers all exited. May block on the engine for as long as the engine's own
        timeouts allow (it holds no lock while it does). Records container news
        (RUNNING, EXITED with the code and a reason a user can act on) and carries out kills
        the database asks for (allocations TERMINATING, or asked to stop before they run).
        Idempotent: news already recorded changes nothing, a kill already sent is not sent
        twice, and after a master restart it carries on from the rows.

        An engine that cannot be reached now is not an error of the round: log it and return
        what was recorded; the next round tries again. Returns the trial exits of allocations
        the manager ended itself (never run, or given up on); the loop feeds them to the
        searchers.
        """

    @abstractmethod
    def schedule(self) -> None:
        """Place the PENDING allocations (and retry the claimed ones the engine has not taken
        yet). Called once per round after the searchers; no lock held.

        Each allocation is claimed in its own step (:mod:`stalwart.master.rm.claim`); the
        engine call (``sbatch``, creating a Job) follows outside any step and its answer is
        applied in another. A failure that may pass (engine busy, throttled, unreachable)
        leaves the allocation claimed for the next round; a refusal that cannot pass (invalid
        request) exits its containers with the engine's message, and the trial errors at once.
        Never submits one allocation twice, even across a master restart.
        """

    def close(self) -> None:  # noqa: B027 - most engines hold nothing to release
        """Release the engine's connections and threads; idempotent. Called when the master
        stops."""


class Reattaches(ABC):
    """Capability: the manager keeps in-memory tracking of engine jobs that a new master must
    rebuild (Slurm/PBS job ids, Kubernetes informers)."""

    @abstractmethod
    def reattach(self) -> None:
        """Rebuild the tracking of every live allocation's engine job from the database, so
        that a master restarted while they ran adopts them; idempotent. The loop calls it
        before the first :meth:`ResourceManager.sync` of this master's life, without the
        lock. Raise nothing for an engine that cannot be reached (the next sync retries)."""


@dataclass(frozen=True)
class EnginePool:
    """A resource pool as the engine defines it (a Slurm partition, a PBS queue)."""

    view: PoolView
    default: bool
    gpu_types: tuple[str, ...]


class EnginePools(ABC):
    """Capability: the engine, not the master config, defines the resource pools."""

    scheduler_type: str = ""
    """Determined's scheduler type of these pools (``SLURM``, ``PBS``)."""

    @abstractmethod
    def engine_pools(self, session: Session) -> list[EnginePool]:
        """Every pool in the engine's order with slot counts (Stalwart's own queue counts read
        through ``session``). Cached by the manager; asks the engine when stale; the last
        answer when the engine cannot be reached (empty before the first). Thread-safe: the
        API calls it while the loop runs."""

    @abstractmethod
    def check_pool(self, pool: str) -> None:
        """Raise :class:`~stalwart.errors.InvalidArgumentError` naming the valid pools when
        ``pool`` is not one of the engine's; accepts ``default`` and anything while no answer
        is known. Thread-safe."""


class Prepull(ABC):
    """Capability: the manager's pools get their images pulled before a task needs them."""

    @property
    @abstractmethod
    def prepull_settings(self) -> PrepullSettings:
        """The pre-pull settings this engine follows."""

    @abstractmethod
    def prepull_pools(self) -> Mapping[str, DeviceType]:
        """Each pool to plan for, with its slot type (the pool's default images depend on
        it). May read the database; no state lock needed (it changes nothing)."""


class BatchLauncher:
    """Capability: the engine starts Stalwart's launcher (``python -m stalwart.hpc.task``) in
    each container, which fetches its spec with ``POST /allocations/{id}/batch/start`` and
    reports its exit with ``batch/exit``; its containers are recorded with
    :attr:`container_agent` as ``agent_id``. (A marker with one attribute: nothing to
    implement.)"""

    container_agent: str = ""


class ServiceAddresses(ABC):
    """Capability: the master can reach a running task's ports, as it must to proxy
    notebooks, TensorBoards and shells (interactive tasks)."""

    @abstractmethod
    def service_host(self, session: Session, allocation_id: str, rank: int = 0) -> str | None:
        """The host (address) where ``rank`` of the allocation listens, as the master reaches
        it; None while it is not known (not started yet)."""
