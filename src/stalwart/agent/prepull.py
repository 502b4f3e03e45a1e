"""``Prepuller``: pulls the master's pre-pull plan (``SyncResponse.prepull``) in the background.

An agent with a container engine hands every sync answer's ``prepull`` list to
:meth:`Prepuller.offer`, which only records it and wakes the puller's thread: the sync loop is
never blocked. The thread pulls, one at a time and in the plan's order, the images it has not
pulled (or found present) yet, through the agent's shared
:class:`~stalwart.agent.images.EngineImages`: a task that needs the image being pulled waits
for that pull rather than starting another. An image that failed is tried again at most every
``retry_seconds`` (five minutes), and its failure is logged once (with the engine's message)
until it succeeds. Images that leave the plan are not pulled any more; nothing is ever removed.
An agent without an engine (``--container-runtime none``) has no pre-puller and ignores the
lists.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from stalwart.agent.images import EngineImages
from stalwart.errors import StalwartError

__all__ = ["RETRY_SECONDS", "Prepuller"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 300.0
"""Shortest time between two tries of an image that failed to pull."""


class Prepuller:
    """One background thread pulling the pre-pull plan (see the module docstring).

    :meth:`offer` and :meth:`close` may be called from any thread.
    """

    def __init__(
        self,
        images: EngineImages,
        *,
        retry_seconds: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.images = images
        self.retry_seconds = retry_seconds
        self.clock = clock
        self.pulled: set[str] = set()  # pulled here, or found present
        self.failed: dict[str, float] = {}  # image -> when its last try failed
        self.busy: str | None = None  # the image being pulled now
        self._plan: list[str] = []
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def offer(self, plan: Sequence[str]) -> None:
        """The master's latest plan (replaces the last one); returns at once."""
        wanted = list(dict.fromkeys(image for image in plan if image))
        with self._wake:
            if self._closed or wanted == self._plan:
                return
            self._plan = wanted
            if self._thread is None and wanted:
                self._thread = threading.Thread(target=self._run, name="prepull", daemon=True)
                self._thread.start()
            self._wake.notify_all()

    def close(self, timeout: float = 1.0) -> None:
        """Stop the thread after the pull under way (waits at most ``timeout`` for it)."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def idle(self) -> bool:
        """Whether nothing in the plan is left to try now (for tests and logs)."""
        with self._wake:
            return self.busy is None and self._next()[0] is None

    def _next(self) -> tuple[str | None, float | None]:
        """The next image to pull, else how long until a failed one may be tried again
        (None: nothing left). Called with ``_wake`` held."""
        now = self.clock()
        soonest: float | None = None
        for image in self._plan:
            if image in self.pulled:
                continue
            failed_at = self.failed.get(image)
            if failed_at is None or now - failed_at >= self.retry_seconds:
                return image, None
            wait = failed_at + self.retry_seconds - now
            soonest = wait if soonest is None else min(soonest, wait)
        return None, soonest

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    if self._closed:
                        return
                    image, wait = self._next()
                    if image is not None:
                        break
                    self._wake.wait(wait)
                self.busy = image
            try:
                self._pull(image)
            finally:
                with self._wake:
                    self.busy = None

    def _pull(self, image: str) -> None:
        try:
            seconds = self.images.ensure(image)
        except (StalwartError, OSError) as exc:
            outcome: str | None = str(exc)
        except Exception as exc:  # a bug must not end the thread
            log.exception("pre-pulling %s failed", image)
            outcome = f"internal error: {type(exc).__name__}: {exc}"
        else:
            outcome = None
        first = again = False
        with self._wake:
            if outcome is None:
                self.pulled.add(image)
                again = self.failed.pop(image, None) is not None
            else:
                first = image not in self.failed
                self.failed[image] = self.clock()
        if outcome is not None:
            if first:
                log.warning(
                    "pre-pull of %s failed (trying again every %.0fs): %s",
                    image,
                    self.retry_seconds,
                    outcome,
                )
            else:
                log.debug("pre-pull of %s failed again: %s", image, outcome)
        elif seconds is not None:
            log.info("pre-pulled %s in %.1fs", image, seconds)
        elif again:
            log.info("pre-pull: %s is present now", image)
