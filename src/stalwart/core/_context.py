"""``core.init()`` and ``core.Context``: the Core API's entry point.

Contract:

- ``init()`` takes Determined 0.38's keyword arguments. Inside a task (:func:`env.current` is
  set) it builds contexts that talk to the master; outside one it builds the local twins
  (metrics printed and kept in memory, checkpoints under ``./checkpoints`` or the given
  ``checkpoint_storage``, never preempted). ``async_checkpointing`` is accepted and ignored.
- ``tensorboard_mode`` (trial tasks): TensorBoard files under ``train.get_tensorboard_path()``
  go to the trial's directory in the experiment config's ``checkpoint_storage`` (the one the
  master's TensorBoard tasks read), uploaded automatically (``AUTO``) or by
  ``train.upload_tensorboard_files()`` (``MANUAL``); see :mod:`stalwart.core._train`.
- A trial task calls ``POST /api/v1/runs/start`` once, as ``init()`` returns, to register its
  checkpoint storage (the answer's ``storageId`` goes into every checkpoint report), unless
  it uses the experiment config's storage and Stalwart's master gave that storage's id in
  ``STALWART_STORAGE_ID`` (:attr:`~stalwart.core.env.TrialEnv.storage_id`). The call
  runs in a thread of its own (:class:`RunStart`), so a trial's start does not wait for the
  master: a checkpoint report waits for its answer, and leaving the context waits for it too
  and raises what it raised (unless the block is already raising).
- A multi-slot or multi-container task needs an explicit ``distributed`` (:class:`ValueError`).
- ``with init() as ctx:`` starts the preemption watcher (and the profiler when the experiment
  config has ``profiling.enabled``); leaving the block (or :meth:`Context.close`) stops them,
  flushes the queued metrics and closes the connections. An error the metrics thread met is
  raised then, unless the block is already raising. ``InvalidHP`` raised in the block is
  reported as an early exit and the process exits 0 (Determined's behaviour).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import types
from collections.abc import Mapping
from typing import Any

from stalwart.core import env as task_env
from stalwart.core._checkpoint import CheckpointContext, LocalCheckpointContext
from stalwart.core._client import RetryPolicy, Session
from stalwart.core._distributed import DistributedContext, DummyDistributedContext
from stalwart.core._info import ClusterInfo
from stalwart.core._preempt import LocalPreemptContext, PreemptContext, PreemptMode
from stalwart.core._profiler import DummyProfilerContext, ProfilerContext
from stalwart.core._searcher import (
    LocalSearcherContext,
    SearcherContext,
    SearcherContextMissing,
    parse_max_length,
    parse_units,
)
from stalwart.core._storage import (
    StorageBackend,
    storage_config_of,
    storage_from_argument,
    storage_from_master,
)
from stalwart.core._train import (
    EarlyExitReason,
    InvalidHP,
    LocalTrainContext,
    TensorboardMode,
    TrainContext,
)
from stalwart.storage.tensorboard import TensorboardFiles

__all__ = ["DEFAULT_LOCAL_CHECKPOINTS", "Context", "build_context", "init"]

logger = logging.getLogger("stalwart.core")

DEFAULT_LOCAL_CHECKPOINTS = "checkpoints"
"""Where checkpoints go off-cluster when ``checkpoint_storage`` is not given (relative to the
working directory at ``init()``)."""

StorageArg = str | os.PathLike[str] | Mapping[str, Any]


class Context:
    """The Core API: ``.train``, ``.checkpoint``, ``.preempt``, ``.distributed``, ``.searcher``,
    ``.profiler`` and ``.info`` (None off-cluster). Build it with :func:`init`."""

    def __init__(
        self,
        *,
        checkpoint: CheckpointContext | LocalCheckpointContext,
        distributed: DistributedContext,
        preempt: PreemptContext,
        train: TrainContext | LocalTrainContext,
        searcher: SearcherContext,
        info: ClusterInfo | None = None,
        session: Session | None = None,
        profiler: ProfilerContext | DummyProfilerContext | None = None,
        run_start: RunStart | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.distributed = distributed
        self.preempt = preempt
        self.train = train
        self.searcher = searcher
        self.info = info
        self.profiler = profiler or DummyProfilerContext()
        self._session = session
        self._run_start = run_start
        self._closed = False

    def start(self) -> None:
        """Start the background work (the preemption watcher; the profiler if enabled)."""
        self.preempt.start()
        self.profiler.start()

    def __enter__(self) -> Context:
        self.start()
        return self

    def close(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: types.TracebackType | None = None,
    ) -> None:
        """Stop the watcher and the profiler, flush metrics, close connections (idempotent). A
        metrics error is raised unless ``exc_val`` says the caller is already failing."""
        if self._closed:
            return
        self._closed = True
        try:
            self.preempt.close()
            self.profiler.close()
            if self._run_start is not None:  # before the session closes under it
                self._run_start.wait(raise_errors=exc_val is None)
            self.train.close(raise_errors=exc_val is None)
        finally:
            self.distributed.close()
            if self._session is not None:
                self._session.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: types.TracebackType | None,
    ) -> None:
        if isinstance(exc_val, InvalidHP):
            self.train.report_early_exit(EarlyExitReason.INVALID_HP)
            self.close()
            logger.info("InvalidHP detected during Trial init, converting InvalidHP to exit(0)")
            sys.exit(0)
        self.close(exc_type, exc_val, exc_tb)


def _local(
    distributed: DistributedContext | None,
    checkpoint_storage: StorageArg | None,
    preempt_mode: PreemptMode,
    info: ClusterInfo | None = None,
    session: Session | None = None,
) -> Context:
    dist = distributed or DummyDistributedContext()
    storage = storage_from_argument(
        checkpoint_storage if checkpoint_storage is not None else DEFAULT_LOCAL_CHECKPOINTS
    )
    logger.info("storing checkpoints in %s", storage)
    return Context(
        checkpoint=LocalCheckpointContext(dist, storage),
        distributed=dist,
        preempt=LocalPreemptContext(dist, preempt_mode),
        train=LocalTrainContext(),
        searcher=LocalSearcherContext(dist),
        info=info,
        session=session,
    )


def _tensorboard_files(
    env: task_env.TaskEnv,
    trial: task_env.TrialEnv,
    storage: StorageBackend,
    storage_arg: StorageArg,
    configured: Any,
) -> TensorboardFiles | None:
    """Where the trial's TensorBoard files go: the experiment config's storage (TensorBoard
    tasks read that one, whatever ``init()`` was given); None, logged, when it cannot open."""
    try:
        tb_storage = storage
        if configured and storage_arg is not configured:
            tb_storage = storage_from_master(configured)
        return TensorboardFiles(tb_storage, env.cluster_id, trial.experiment_id, trial.trial_id)
    except Exception as exc:
        logger.warning("TensorBoard files will not be uploaded: %s", exc)
        return None


def _trial(
    env: task_env.TaskEnv,
    trial: task_env.TrialEnv,
    session: Session,
    dist: DistributedContext,
    checkpoint_storage: StorageArg | None,
    preempt_mode: PreemptMode,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    configured = trial.config.get("checkpoint_storage")
    storage_arg: StorageArg | None = checkpoint_storage
    if storage_arg is None:
        storage_arg = configured
    if not storage_arg:
        raise ValueError("the experiment config has no checkpoint_storage")
    if checkpoint_storage is None:  # the experiment config's: the master validated it
        storage = storage_from_master(storage_arg)
    else:
        storage = storage_from_argument(storage_arg)
    tensorboard_files = _tensorboard_files(env, trial, storage, storage_arg, configured)
    run_start = (
        RunStart.known(trial.storage_id)
        if checkpoint_storage is None and trial.storage_id is not None
        else RunStart(
            session, {"runId": trial.trial_id, "checkpointStorage": storage_config_of(storage_arg)}
        )
    )
    train = TrainContext(
        session,
        trial_id=trial.trial_id,
        trial_run_id=trial.trial_run_id,
        experiment_id=trial.experiment_id,
        allocation_id=env.allocation_id,
        rank=dist.rank,
        tensorboard_mode=tensorboard_mode,
        tensorboard_files=tensorboard_files,
        reports_spool=env.reports_spool,
    )
    max_length = parse_max_length(trial.config)
    initial_steps = trial.steps_completed
    profiler = ProfilerContext(
        train.report_metrics,
        lambda: max(initial_steps, train.latest_training_steps),
        dist.local_rank,
        env.agent_id,
        enabled=bool((trial.config.get("profiling") or {}).get("enabled")),
    )
    searcher: SearcherContext = (
        SearcherContext(dist, max_length, train.report_progress, parse_units(trial.config))
        if max_length is not None
        else SearcherContextMissing()
    )
    return Context(
        checkpoint=CheckpointContext(
            dist,
            storage,
            session,
            task_id=env.task_id,
            allocation_id=env.allocation_id,
            storage_backend_id=run_start.storage_id,
            before_report=train.flush_metrics,
        ),
        distributed=dist,
        preempt=PreemptContext(session, env.allocation_id, dist, preempt_mode),
        train=train,
        searcher=searcher,
        info=ClusterInfo(env),
        session=session,
        profiler=profiler,
        run_start=run_start,
    )


class RunStart:
    """``POST /api/v1/runs/start`` in a thread of its own, started at once (see the module
    contract): :meth:`storage_id` and :meth:`wait` block until the answer. :meth:`known`:
    the answer is already known (no request)."""

    def __init__(self, session: Session, body: dict[str, Any]) -> None:
        self._storage_id: int | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = threading.Thread(
            target=self._post, args=(session, body), name="stalwart-run-start", daemon=True
        )
        self._thread.start()

    @classmethod
    def known(cls, storage_id: int) -> RunStart:
        """A run whose storage the master registered before the task started
        (``STALWART_STORAGE_ID``): nothing to post or wait for."""
        run = cls.__new__(cls)
        run._storage_id, run._error, run._thread = storage_id, None, None
        return run

    def _post(self, session: Session, body: dict[str, Any]) -> None:
        try:
            backend = session.post("/api/v1/runs/start", body).get("storageId")
            self._storage_id = int(backend) if backend is not None else None
        except BaseException as exc:  # handed to whoever waits
            self._error = exc

    def wait(self, *, raise_errors: bool = True) -> None:
        """Wait for the answer; raise the request's error (when ``raise_errors``)."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None and raise_errors:
            raise self._error

    def storage_id(self) -> int | None:
        """The run's ``storageId`` (waits for the answer; raises the request's error)."""
        self.wait()
        return self._storage_id


def build_context(
    env: task_env.TaskEnv | None,
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: StorageArg | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    retry: RetryPolicy | None = None,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """:func:`init` for a given task environment (None: off-cluster) and retry policy."""
    mode = PreemptMode(preempt_mode)
    tb_mode = TensorboardMode(tensorboard_mode)
    if env is None:
        return _local(distributed, checkpoint_storage, mode)
    rendezvous = env.rendezvous
    containers = len(rendezvous.container_addrs) if rendezvous is not None else 1
    if distributed is None and (containers > 1 or len(env.slot_ids) > 1):
        raise ValueError("you must provide a valid DistributedContext for a multi-slot task")
    dist = distributed or DummyDistributedContext()
    session = Session(env.master_url, env.session_token, retry=retry)
    try:
        if env.trial is None:
            return _local(dist, checkpoint_storage, mode, ClusterInfo(env), session)
        return _trial(env, env.trial, session, dist, checkpoint_storage, mode, tb_mode)
    except BaseException:
        session.close()
        raise


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: StorageArg | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    async_checkpointing: bool = True,
) -> Context:
    """The Core API context for this process: ``with core.init() as core_context: ...``.

    Arguments (Determined 0.38's):
        distributed: required for multi-slot tasks; rank 0 of 1 otherwise.
        checkpoint_storage: a directory path or a ``checkpoint_storage`` config dict; default:
            the experiment's storage in a task, ``./checkpoints`` off-cluster.
        preempt_mode: who calls ``preempt.should_preempt()`` (:class:`PreemptMode`).
        tensorboard_mode: ``AUTO`` uploads the files under ``train.get_tensorboard_path()``
            after each report; with ``MANUAL`` call ``train.upload_tensorboard_files()``.
        async_checkpointing: accepted; checkpoints are stored synchronously.
    """
    return build_context(
        task_env.current(),
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=preempt_mode,
        tensorboard_mode=tensorboard_mode,
    )
