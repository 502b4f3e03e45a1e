"""Uploading a trial's TensorBoard files (what Determined's ``TensorboardManager`` does).

Contract:

- The training code writes TensorBoard files (e.g. with a ``SummaryWriter``) into
  ``core_context.train.get_tensorboard_path()``; :meth:`TensorboardUploader.sync` uploads the
  files that are new or changed (size or modification time) since they were last uploaded, to
  the trial's directory in the experiment's checkpoint storage
  (:class:`stalwart.storage.tensorboard.TensorboardFiles`), where a TensorBoard task finds them.
- ``selector`` gets each file's full path and keeps it when True; ``mangler`` maps the path
  relative to the TensorBoard directory and the rank to the stored path (Determined's
  arguments).
- Uploads run in the caller's thread, one at a time (a lock). Unforced syncs happen at most
  once a second (Determined's limit, kind to object-store quotas); a forced sync always runs.
- It never fails training: a file that cannot be uploaded is logged and tried again at the
  next sync.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from stalwart.storage.tensorboard import TensorboardFiles

__all__ = ["MIN_SYNC_INTERVAL_S", "TensorboardUploader"]

logger = logging.getLogger("stalwart.core")

MIN_SYNC_INTERVAL_S = 1.0


def _everything(_: Path) -> bool:
    return True


def _unchanged(path: Path, _: int) -> Path:
    return path


class TensorboardUploader:
    """Uploads the files under ``base_path`` to ``files`` (see the module contract)."""

    def __init__(
        self,
        files: TensorboardFiles,
        base_path: Path,
        rank: int = 0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.files = files
        self.base_path = base_path
        self.rank = rank
        self._clock = clock
        self._last_sync: float | None = None
        self._uploaded: dict[Path, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def sync(
        self,
        selector: Callable[[Path], bool] = _everything,
        mangler: Callable[[Path, int], Path] = _unchanged,
        *,
        force: bool = False,
    ) -> list[str]:
        """Upload new and changed files; the stored paths uploaded."""
        with self._lock:
            now = self._clock()
            if (
                not force
                and self._last_sync is not None
                and now - self._last_sync < MIN_SYNC_INTERVAL_S
            ):
                return []
            self._last_sync = now
            return self._upload_changed(selector, mangler)

    def _upload_changed(
        self, selector: Callable[[Path], bool], mangler: Callable[[Path, int], Path]
    ) -> list[str]:
        if not self.base_path.is_dir():
            return []
        done = []
        for path in sorted(self.base_path.rglob("*")):
            try:
                stat = path.stat()
                if not path.is_file() or not selector(path):
                    continue
                version = (stat.st_size, stat.st_mtime_ns)
                if self._uploaded.get(path) == version:
                    continue
                stored = mangler(path.relative_to(self.base_path), self.rank).as_posix()
                self.files.upload(path, stored)
            except Exception as exc:
                logger.warning("could not upload the TensorBoard file %s: %s", path, exc)
                continue
            self._uploaded[path] = version
            done.append(stored)
        if done:
            logger.debug("uploaded %d TensorBoard file(s) to %s", len(done), self.files.url)
        return done
