"""Informers: a local, watch-fed copy of one kind of object (no polling per pod).

:class:`Informer` lists the objects matching a label selector once, then watches from the
list's resource version (bookmarks on, so a quiet watch still advances its version). Each event
updates the cache and calls ``on_change``. When the server says the version is too old (410
Gone) it lists again (objects that vanished meanwhile are dropped); a broken stream or server
error waits (backoff up to 10 s) and watches again from the last version seen. One daemon
thread per informer; :meth:`Informer.stop` ends it (at the latest when the current watch
request times out).

:attr:`Informer.synced` is set once the first list is in the cache: until then a reader cannot
tell a missing object from one not yet seen, so the resource manager waits for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from stalwart.master.rm.kubernetes.client import GoneError, Kind, KubeApi, KubeError

__all__ = ["Informer"]

log = logging.getLogger("stalwart.k8s")


class Informer:
    """A watch-fed cache of ``kind`` in ``namespace`` matching ``selector`` (see the module)."""

    def __init__(
        self,
        api: KubeApi,
        kind: Kind,
        namespace: str,
        selector: str,
        *,
        on_change: Callable[[], None] = lambda: None,
        watch_timeout: int = 60,
    ) -> None:
        self.api = api
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.synced = threading.Event()
        self.relists = 0
        """How many times it listed (1 + the 410 Gone recoveries and restarts)."""
        self.resource_version = ""
        self._objects: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"stalwart-k8s-{self.kind}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def objects(self) -> list[dict[str, Any]]:
        """A snapshot of the cached objects."""
        with self._lock:
            return list(self._objects.values())

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get(name)

    def _relist(self) -> None:
        items, version = self.api.list(self.kind, self.namespace, self.selector)
        with self._lock:
            self._objects = {obj["metadata"]["name"]: obj for obj in items}
            self.resource_version = version
        self.relists += 1
        self.synced.set()
        self.on_change()

    def _run(self) -> None:
        backoff = 0.5
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                self._watch()
                backoff = 0.5
            except GoneError:
                log.info("watch of %s: resource version too old, listing again", self.kind)
                need_list = True
            except (KubeError, ValueError, KeyError) as exc:
                log.warning("watch of %s failed (retrying in %.1fs): %s", self.kind, backoff, exc)
                self._stop.wait(backoff)
                backoff = min(10.0, backoff * 2)

    def _watch(self) -> None:
        events = self.api.watch(
            self.kind, self.namespace, self.resource_version, self.selector, self.watch_timeout
        )
        for event in events:
            if self._stop.is_set():
                return
            version = event.resource_version
            if event.type == "BOOKMARK":
                if version:
                    self.resource_version = version
                continue
            name = event.object.get("metadata", {}).get("name")
            with self._lock:
                if event.type == "DELETED":
                    self._objects.pop(name, None)
                elif name:
                    self._objects[name] = event.object
                if version:
                    self.resource_version = version
            self.on_change()
