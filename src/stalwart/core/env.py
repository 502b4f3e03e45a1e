"""The task contract as one typed object: every variable a task reads lives in :class:`TaskEnv`.

Contract:

- :meth:`TaskEnv.from_environ` is the only place the harness reads ``os.environ`` (wire doc
  5.2); it also reads ``$DET_RUN_DIR/info/rendezvous.json`` when present. Everything else in
  ``stalwart.core`` receives a ``TaskEnv`` (or nothing, off-cluster).
- Not in a task (``DET_MASTER`` or ``DET_ALLOCATION_ID`` unset): ``None``. ``DET_MASTER`` alone is
  common in a user's shell (the CLI reads it), so it does not make a task.
- In a task, a missing or malformed variable raises :class:`TaskEnvError` that names every bad
  variable at once. ``TRIAL`` tasks also need the trial variables.
- :func:`current` is :meth:`TaskEnv.from_environ` read once per process (``current.cache_clear()``
  forgets it, for tests). :func:`torch_launcher_env` / :func:`deepspeed_launcher_env` read the
  ranks a launcher gives each worker, :func:`comm_env` where the workers meet (the chief's
  address, the allocation's ports) and :func:`launcher_rank` the rank a log line is tagged with.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stalwart.errors import StalwartError

__all__ = [
    "CommEnv",
    "Rendezvous",
    "TaskEnv",
    "TaskEnvError",
    "TorchLauncherEnv",
    "TrainPorts",
    "TrialEnv",
    "canonical_master_url",
    "comm_env",
    "current",
    "deepspeed_launcher_env",
    "launcher_rank",
    "torch_launcher_env",
]

DEFAULT_MASTER_PORT = 8080


class TaskEnvError(StalwartError):
    """The task's environment breaks the task contract (a launcher bug, not a user error)."""

    code = "invalid_task_env"


def canonical_master_url(value: str) -> str:
    """``DET_MASTER`` as the official client canonicalizes it: scheme and port added when
    missing (``http://HOST:8080``), trailing ``/`` stripped."""
    url = value.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    scheme, rest = url.split("://", 1)
    host, slash, path = rest.partition("/")
    if ":" not in host.rsplit("]", 1)[-1]:
        host = f"{host}:{DEFAULT_MASTER_PORT}"
    return f"{scheme}://{host}{slash}{path}".rstrip("/")


@dataclass(frozen=True)
class Rendezvous:
    """``rendezvous.json``: the containers of a multi-container allocation and this one's rank."""

    container_addrs: tuple[str, ...]
    container_rank: int
    container_slot_counts: tuple[int, ...]


@dataclass(frozen=True)
class TrainPorts:
    """The allocation's own ports for distributed training (wire doc 5.2); Determined's bases
    where a variable is unset."""

    dtrain_ssh: int = 12350
    """``DTRAIN_SSH_PORT``."""
    comm_1: int = 12360
    """``INTER_TRAIN_PROCESS_COMM_PORT_1``: the chief's collectives server."""
    comm_2: int = 12365
    """``INTER_TRAIN_PROCESS_COMM_PORT_2``."""
    c10d: int = 29400
    """``C10D_PORT``: the torch launcher's rendezvous store on the chief."""


@dataclass(frozen=True)
class TrialEnv:
    """The trial variables of a ``TRIAL`` task."""

    trial_id: int
    experiment_id: int
    trial_run_id: int
    trial_seed: int
    hparams: Mapping[str, Any]
    config: Mapping[str, Any]
    """The fully defaulted experiment config (``DET_EXPERIMENT_CONFIG``)."""
    steps_completed: int
    storage_id: int | None = None
    """``STALWART_STORAGE_ID``: the id under which Stalwart's master already registered the
    experiment config's ``checkpoint_storage`` (what ``runs/start`` would answer for it); unset
    where the master did not know it yet, and by Determined's master."""


@dataclass(frozen=True)
class TaskEnv:
    """Everything a task learns from its environment (wire doc 5.2 and 5.3)."""

    master_url: str
    cluster_id: str
    agent_id: str
    slot_ids: tuple[int, ...]
    task_id: str
    allocation_id: str
    session_token: str
    task_type: str
    user: str | None = None
    container_id: str | None = None
    """``DET_CONTAINER_ID``, else ``DET_RESOURCES_ID``."""
    run_dir: Path | None = None
    latest_checkpoint: str | None = None
    trial: TrialEnv | None = None
    rendezvous: Rendezvous | None = None
    ports: TrainPorts = TrainPorts()
    reports_spool: Path | None = None
    """``STALWART_REPORTS_SPOOL``: a directory Stalwart's agent reads when the task's process
    exits; the harness leaves there the metrics reports the master had not answered when it
    closed, and the agent sends them with the exit (:mod:`stalwart.core._metrics`). Unset
    under other launchers, which read no such thing."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TaskEnv | None:
        """The task's environment, or None outside a task (see the module contract)."""
        env = os.environ if environ is None else environ
        if not env.get("DET_MASTER") or not env.get("DET_ALLOCATION_ID"):
            return None
        reader = _Reader(env)
        task_type = reader.text("DET_TASK_TYPE")
        trial = _read_trial(reader) if task_type == "TRIAL" else None
        run_dir_text = env.get("DET_RUN_DIR")
        run_dir = Path(run_dir_text) if run_dir_text else None
        spool_text = env.get("STALWART_REPORTS_SPOOL")
        task = cls(
            master_url=canonical_master_url(reader.text("DET_MASTER")),
            cluster_id=reader.text("DET_CLUSTER_ID"),
            agent_id=reader.text("DET_AGENT_ID"),
            slot_ids=reader.slot_ids("DET_SLOT_IDS"),
            task_id=reader.text("DET_TASK_ID"),
            allocation_id=reader.text("DET_ALLOCATION_ID"),
            session_token=reader.text("DET_SESSION_TOKEN"),
            task_type=task_type,
            user=env.get("DET_USER") or None,
            container_id=env.get("DET_CONTAINER_ID") or env.get("DET_RESOURCES_ID") or None,
            run_dir=run_dir,
            latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
            trial=trial,
            rendezvous=_read_rendezvous(reader, run_dir),
            ports=_read_ports(reader),
            reports_spool=Path(spool_text) if spool_text else None,
        )
        reader.raise_problems()
        return task

    @property
    def is_trial(self) -> bool:
        """Whether this is a ``TRIAL`` task (with :attr:`trial` set)."""
        return self.trial is not None


class _Reader:
    """Reads variables, collecting every problem instead of stopping at the first."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[str] = []

    def text(self, name: str) -> str:
        value = self.env.get(name)
        if value is None or value == "":
            self.problems.append(f"{name} is not set")
            return ""
        return value

    def integer(self, name: str) -> int:
        if not self.text(name):  # its problem is noted
            return 0
        found = self.optional_integer(name)
        return 0 if found is None else found

    def optional_integer(self, name: str) -> int | None:
        value = self.env.get(name)
        if not value:
            return None
        try:
            return int(value)
        except ValueError:
            self.problems.append(f"{name} is not an integer: {value!r}")
            return None

    def optional_port(self, name: str, default: int) -> int:
        value = self.env.get(name)
        if not value:
            return default
        if not value.isdigit() or not 0 < int(value) < 65536:
            self.problems.append(f"{name} is not a port number: {value!r}")
            return default
        return int(value)

    def json_value(self, name: str, default: Any) -> Any:
        value = self.text(name)
        if not value:
            return default
        try:
            return json.loads(value)
        except ValueError as exc:
            self.problems.append(f"{name} is not JSON: {exc}")
            return default

    def json_object(self, name: str) -> dict[str, Any]:
        value = self.json_value(name, {})
        if not isinstance(value, dict):
            self.problems.append(f"{name} is not a JSON object")
            return {}
        return value

    def slot_ids(self, name: str) -> tuple[int, ...]:
        value = self.json_value(name, [])
        if not isinstance(value, list):
            self.problems.append(f"{name} is not a JSON list")
            return ()
        out: list[int] = []
        for item in value:
            if isinstance(item, int) and not isinstance(item, bool):
                out.append(item)
            elif isinstance(item, str) and item.isdigit():
                out.append(int(item))
            else:
                self.problems.append(f"{name} has a slot id that is not an integer: {item!r}")
        return tuple(out)

    def raise_problems(self) -> None:
        if self.problems:
            raise TaskEnvError(
                "the task environment is incomplete: " + "; ".join(self.problems),
                hint="the launcher must set the variables of the task contract",
            )


def _read_trial(reader: _Reader) -> TrialEnv:
    return TrialEnv(
        trial_id=reader.integer("DET_TRIAL_ID"),
        experiment_id=reader.integer("DET_EXPERIMENT_ID"),
        trial_run_id=reader.integer("DET_TRIAL_RUN_ID"),
        trial_seed=reader.integer("DET_TRIAL_SEED"),
        hparams=reader.json_object("DET_HPARAMS"),
        config=reader.json_object("DET_EXPERIMENT_CONFIG"),
        steps_completed=reader.integer("DET_STEPS_COMPLETED"),
        storage_id=reader.optional_integer("STALWART_STORAGE_ID"),
    )


def _read_ports(reader: _Reader) -> TrainPorts:
    base = TrainPorts()
    return TrainPorts(
        dtrain_ssh=reader.optional_port("DTRAIN_SSH_PORT", base.dtrain_ssh),
        comm_1=reader.optional_port("INTER_TRAIN_PROCESS_COMM_PORT_1", base.comm_1),
        comm_2=reader.optional_port("INTER_TRAIN_PROCESS_COMM_PORT_2", base.comm_2),
        c10d=reader.optional_port("C10D_PORT", base.c10d),
    )


def _read_rendezvous(reader: _Reader, run_dir: Path | None) -> Rendezvous | None:
    if run_dir is None:
        return None
    path = run_dir / "info" / "rendezvous.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        reader.problems.append(f"{path} cannot be read: {exc}")
        return None
    try:
        addrs = tuple(str(a) for a in raw["container_addrs"])
        rank = int(raw["container_rank"])
        counts = tuple(int(c) for c in raw["container_slot_counts"])
    except (KeyError, TypeError, ValueError) as exc:
        reader.problems.append(f"{path} is malformed: {exc!r}")
        return None
    return Rendezvous(container_addrs=addrs, container_rank=rank, container_slot_counts=counts)


@functools.cache
def current() -> TaskEnv | None:
    """This process's :class:`TaskEnv` (read once), or None outside a task."""
    return TaskEnv.from_environ()


@dataclass(frozen=True)
class TorchLauncherEnv:
    """A worker's place as its launcher tells it (torch, DeepSpeed: the same six numbers)."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int


def torch_launcher_env(environ: Mapping[str, str] | None = None) -> TorchLauncherEnv:
    """What ``torch.distributed.run`` sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``); :class:`KeyError` when a
    variable is missing (what ``DistributedContext.from_torch_distributed`` callers catch to
    detect a plain run)."""
    env = os.environ if environ is None else environ
    size = int(env["WORLD_SIZE"])
    local_size = int(env["LOCAL_WORLD_SIZE"])
    groups = env.get("GROUP_WORLD_SIZE")
    return TorchLauncherEnv(
        rank=int(env["RANK"]),
        size=size,
        local_rank=int(env["LOCAL_RANK"]),
        local_size=local_size,
        cross_rank=int(env["GROUP_RANK"]),
        cross_size=int(groups) if groups else (size // local_size if local_size else 1),
    )


def deepspeed_launcher_env(environ: Mapping[str, str] | None = None) -> TorchLauncherEnv:
    """What the DeepSpeed launcher sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``LOCAL_SIZE``, ``CROSS_RANK``, ``CROSS_SIZE``); :class:`KeyError` when one is missing."""
    env = os.environ if environ is None else environ
    return TorchLauncherEnv(
        rank=int(env["RANK"]),
        size=int(env["WORLD_SIZE"]),
        local_rank=int(env["LOCAL_RANK"]),
        local_size=int(env["LOCAL_SIZE"]),
        cross_rank=int(env["CROSS_RANK"]),
        cross_size=int(env["CROSS_SIZE"]),
    )


@dataclass(frozen=True)
class CommEnv:
    """Where a worker meets the others for ``DistributedContext``'s collectives."""

    chief_ip: str | None
    """``DET_CHIEF_IP`` (set by Stalwart's launchers), else ``MASTER_ADDR`` (torch, DeepSpeed)."""
    ports: TrainPorts
    key: str
    """``DET_SESSION_TOKEN`` (the allocation's token, the same in all its containers): workers
    prove they know it before the chief unpickles anything from them. Empty off-cluster."""


def comm_env(environ: Mapping[str, str] | None = None) -> CommEnv:
    """The chief's address, the allocation's ports and the group's key (:class:`CommEnv`);
    :class:`TaskEnvError` for a malformed port variable."""
    env = os.environ if environ is None else environ
    reader = _Reader(env)
    ports = _read_ports(reader)
    reader.raise_problems()
    return CommEnv(
        chief_ip=env.get("DET_CHIEF_IP") or env.get("MASTER_ADDR") or None,
        ports=ports,
        key=env.get("DET_SESSION_TOKEN", ""),
    )


def launcher_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """The worker's global rank as a launcher set it (``RANK``), or None when unset or not an
    integer."""
    env = os.environ if environ is None else environ
    value = env.get("RANK", "")
    return int(value) if value.isdigit() else None
