"""``PreemptContext``: should the task stop now (pause, kill, a searcher's stop, Slurm)?

Contract:

- A watcher thread asks the master ``GET /api/v1/allocations/{id}/signals/preemption``
  (``timeout_seconds=0``), then long-polls with ``timeout_seconds=60`` until it hears "preempt"
  or is closed. It starts at the first :meth:`PreemptContext.should_preempt`, which then waits
  for that first answer; later calls only read the watcher's flag, so it is cheap enough to
  call every batch. A task that never asks costs the master no poll at all (a search of short
  trials makes two requests fewer per trial).
- The first time ``should_preempt()`` returns True (with ``auto_ack``), it posts ``POST
  /api/v1/allocations/{id}/signals/ack_preemption``: the coming exit is then a preemption, and
  the trial is resumable. :meth:`acknowledge_preemption_signal` does it by hand.
- A failed poll is logged and retried; a master that is away never makes the watcher raise.
- :meth:`PreemptContext.close` stops the watcher at once, even in the middle of a long poll.
- :class:`LocalPreemptContext` (off-cluster) is never preempted.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any

from stalwart.core._client import Session, SessionClosedError
from stalwart.core._distributed import DistributedContext

__all__ = ["LocalPreemptContext", "PreemptContext", "PreemptMode"]

logger = logging.getLogger("stalwart.core")

LONG_POLL_S = 60
"""How long one preemption long-poll may wait at the master."""
POLL_FAILURE_WAIT_S = 10.0
"""Pause after a failed poll before the next."""
FIRST_ANSWER_DEADLINE_S = 30.0
"""How long the first check keeps retrying an unreachable master (``should_preempt()`` waits
for it, then says False and the watcher keeps trying)."""


class PreemptMode(enum.Enum):
    """Who may call ``should_preempt()``: every worker in step (the chief asks the master and
    broadcasts), only the chief, or every worker asking the master itself."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"


class _Watcher:
    """The long-polling thread (see the module contract)."""

    def __init__(self, session: Session, allocation_id: str) -> None:
        self._session = session
        self._path = f"/api/v1/allocations/{allocation_id}/signals/preemption"
        self._first = threading.Event()
        self._preempt = threading.Event()
        self._starting = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"stalwart-preempt-{allocation_id}", daemon=True
        )

    def start(self) -> None:
        """Start polling, once; later calls do nothing (thread-safe)."""
        with self._starting:
            if self._thread.ident is None and not self._session.closed:
                self._thread.start()

    def _poll(self, timeout_s: int) -> bool:
        # The first answer is waited for by should_preempt(): give up on it sooner.
        deadline = time.monotonic() + FIRST_ANSWER_DEADLINE_S if timeout_s == 0 else None
        body = self._session.get(
            self._path,
            params={"timeout_seconds": str(timeout_s)},
            timeout_s=timeout_s + 30,
            deadline=deadline,
        )
        return body.get("preempt") is True

    def _run(self) -> None:
        timeout_s = 0
        while not self._session.closed and not self._preempt.is_set():
            try:
                if self._poll(timeout_s):
                    self._preempt.set()
            except SessionClosedError:
                break
            except Exception:  # never let the watcher die: log, wait, ask again
                logger.warning("preemption check failed (retrying)", exc_info=True)
                self._first.set()
                if self._session.wait_closed(POLL_FAILURE_WAIT_S):
                    break
            self._first.set()
            timeout_s = LONG_POLL_S
        self._first.set()

    def should_preempt(self) -> bool:
        self.start()
        self._first.wait()
        return self._preempt.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the signal arrives (True) or ``timeout`` passes (False)."""
        return self._preempt.wait(timeout)

    def close(self) -> None:
        with self._starting:  # no start after this
            if self._session.closed:
                return
            self._session.close()
        self._first.set()  # a should_preempt() still waiting says False
        if self._thread.ident is not None:
            self._thread.join(timeout=5)
            if self._thread.is_alive():
                logger.warning("the preemption watcher did not stop in time")


class PreemptContext:
    """Preemption signals of one allocation (see the module contract)."""

    def __init__(
        self,
        session: Session,
        allocation_id: str,
        dist: DistributedContext,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    ) -> None:
        self._session = session
        self._allocation_id = allocation_id
        self._dist = dist
        self._mode = PreemptMode(preempt_mode)
        self._watcher: _Watcher | None = None
        if dist.rank == 0 or self._mode is PreemptMode.WorkersAskMaster:
            self._watcher = _Watcher(session.clone(), allocation_id)
        self._started = False
        self._ack_sent = False

    def start(self) -> PreemptContext:
        """Allow watching (``core.Context.__enter__`` does it); only once. The watcher itself
        starts at the first :meth:`should_preempt` (see the module contract)."""
        if self._started:
            raise RuntimeError("you cannot call PreemptContext.start() multiple times")
        self._started = True
        return self

    def close(self) -> None:
        """Stop watching (at once; idempotent)."""
        if self._watcher is not None:
            self._watcher.close()

    def __enter__(self) -> PreemptContext:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.close()

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Whether the task should checkpoint and exit now. With ``auto_ack``, the first True
        also acknowledges the signal (see the module contract)."""
        if not self._started:
            raise RuntimeError(
                "you cannot call PreemptContext.should_preempt() before PreemptContext.start()"
            )
        if self._watcher is None:
            if self._mode is PreemptMode.ChiefOnly:
                raise RuntimeError(
                    "PreemptContext was configured with preempt_mode=ChiefOnly but "
                    f".should_preempt() was called from non-chief worker of rank={self._dist.rank}"
                )
            out = bool(self._dist.broadcast(None))
        else:
            out = self._watcher.should_preempt()
            if out and auto_ack and not self._ack_sent:
                self.acknowledge_preemption_signal()
            if self._mode is PreemptMode.WorkersAskChief:
                self._dist.broadcast(out)
        return out

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master the task is stopping because of the signal and expects to resume."""
        self._session.post(f"/api/v1/allocations/{self._allocation_id}/signals/ack_preemption")
        self._ack_sent = True


class LocalPreemptContext(PreemptContext):
    """Off-cluster twin: never preempted."""

    def __init__(
        self, dist: DistributedContext, preempt_mode: PreemptMode = PreemptMode.WorkersAskChief
    ) -> None:
        self._dist = dist
        self._mode = PreemptMode(preempt_mode)
        self._watcher = None
        self._started = False
        self._ack_sent = False

    def should_preempt(self, auto_ack: bool = True) -> bool:
        if not self._started:
            raise RuntimeError(
                "you cannot call PreemptContext.should_preempt() before PreemptContext.start()"
            )
        return False

    def acknowledge_preemption_signal(self) -> None:
        """Nothing to acknowledge off-cluster."""
