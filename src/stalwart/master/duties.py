"""The master's background duties: the cluster loop, the webhook deliverer and the retention
schedule. One process runs them: the master's only process, or the leading worker of a
multi-worker master (:class:`~stalwart.master.coordination.Leadership`)."""

from __future__ import annotations

import threading

from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.cluster.webhooks import WebhookDeliverer
from stalwart.master.services.log_retention import CleanupSchedule
from stalwart.master.state import MasterState

__all__ = ["Duties"]


class Duties:
    """Starts and stops the background duties of ``state`` together.

    :meth:`start` may run in another thread than :meth:`stop` (a worker becoming the leader
    while the worker stops): a stop before the start makes the start do nothing, and a stop
    after it stops everything the start started.
    """

    def __init__(self, state: MasterState) -> None:
        self.state = state
        self.loop: ClusterLoop | None = None
        self._deliverer: WebhookDeliverer | None = None
        self._cleanup: CleanupSchedule | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        settings = self.state.settings
        with self._lock:
            if self._stopped or self.loop is not None:
                return
            self.loop = ClusterLoop(self.state)
            self.loop.start()
            self._deliverer = WebhookDeliverer(self.state)  # off the request path
            self._deliverer.start()
            interval = settings.retention_policy.schedule_seconds
            if interval is not None:
                self._cleanup = CleanupSchedule(
                    self.state.sessions, settings.retention_policy.log_retention_days, interval
                )
                self._cleanup.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self.loop is not None:
                self.loop.stop()
            if self._deliverer is not None:
                self._deliverer.stop()
            if self._cleanup is not None:
                self._cleanup.stop()
