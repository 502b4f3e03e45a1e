"""``TrainContext``: report metrics, progress and early exits of a trial (wire doc 5.5).

Contract:

- ``report_*_metrics`` check and snapshot the report in the caller's thread and return at once;
  one background thread posts them in order (:mod:`stalwart.core._metrics`). An error the
  master answered for an earlier report is raised by the next report (or by ``close``).
- Validation metrics: a ``None`` value raises :class:`RuntimeError` (as Determined); ``bytes``
  values are dropped with a warning; NaN and infinities are sent as ``"NaN"``/``"Infinity"``.
- Progress, early exit, status and run metadata are posted synchronously (retried while the
  master is unreachable).
- TensorBoard files (:mod:`stalwart.core._tensorboard`): the training code writes them into
  :meth:`get_tensorboard_path`. With ``TensorboardMode.AUTO`` the chief (rank 0) uploads new
  and changed files after each training or validation report (at most once a second) and at
  ``close``; with ``MANUAL`` the code calls :meth:`TrainContext.upload_tensorboard_files`
  (any rank; every call uploads). Nothing writes metrics into event files (upload only).
- :class:`LocalTrainContext` is the off-cluster twin: reports are printed to stdout and kept in
  :attr:`LocalTrainContext.reports`; nothing is sent anywhere.
"""

from __future__ import annotations

import enum
import json
import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stalwart import errors
from stalwart.core._client import Session
from stalwart.core._json import jsonable
from stalwart.core._metrics import MetricsReport, MetricsShipper, prepare_report
from stalwart.core._tensorboard import TensorboardUploader
from stalwart.storage.tensorboard import TensorboardFiles

__all__ = [
    "EarlyExitReason",
    "InvalidHP",
    "LocalTrainContext",
    "TensorboardMode",
    "TrainContext",
]

logger = logging.getLogger("stalwart.core")

TRAINING = "training"
VALIDATION = "validation"


class TensorboardMode(enum.Enum):
    """``AUTO``: the harness uploads the TensorBoard files after each report and at the end;
    ``MANUAL``: the training code calls ``upload_tensorboard_files()`` itself."""

    AUTO = "AUTO"
    MANUAL = "MANUAL"


class EarlyExitReason(enum.Enum):
    """Why a trial exits before its searcher is done with it."""

    INVALID_HP = "EXITED_REASON_INVALID_HP"
    USER_REQUESTED_STOP = "EXITED_REASON_USER_REQUESTED_STOP"


class InvalidHP(Exception):  # noqa: N818 (Determined's name)
    """Raise inside ``with core.init()`` when the hyperparameters cannot work: the trial is
    reported as an early exit (``INVALID_HP``) and the process exits 0."""

    def __init__(self, msg: str = "user code raised an InvalidHP exception") -> None:
        super().__init__(msg)


def _validation_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    dropped = []
    for name, value in metrics.items():
        if value is None:
            raise RuntimeError(f"Validation metric '{name}' returned an invalid scalar value: None")
        if isinstance(value, bytes | bytearray):
            dropped.append(name)
        else:
            kept[name] = value
    if dropped:
        logger.warning("Removed non serializable metrics: %s", ", ".join(dropped))
    return kept


class _Reporting:
    """What both twins share: argument checks, the three report methods, TensorBoard's path."""

    _tensorboard_path: Path
    latest_training_steps = 0
    """``steps_completed`` of the latest training report (0 before the first)."""

    def _report(self, report: MetricsReport) -> None:
        raise NotImplementedError

    def _after_report(self) -> None:
        """Called after a training or validation report (TensorBoard's automatic upload)."""

    def get_tensorboard_path(self) -> Path:
        """A local directory for TensorBoard files (created); see the module contract for
        how they are uploaded."""
        self._tensorboard_path.mkdir(parents=True, exist_ok=True)
        return self._tensorboard_path

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: Mapping[str, Any],
        batch_metrics: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Report training metrics at ``steps_completed`` (batch metrics are kept, not shown)."""
        self._report(prepare_report(TRAINING, steps_completed, metrics, batch_metrics))
        self.latest_training_steps = steps_completed
        self._after_report()

    def report_validation_metrics(self, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Report validation metrics; the searcher reads ``searcher.metric`` from them."""
        checked = _validation_metrics(metrics)
        self._report(prepare_report(VALIDATION, steps_completed, checked))
        self._after_report()

    def report_metrics(self, group: str, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Report metrics of any group (``training`` and ``validation`` are the built-in ones)."""
        if group == VALIDATION:
            metrics = _validation_metrics(metrics)
        self._report(prepare_report(group, steps_completed, metrics))

    @staticmethod
    def _check_progress(progress: float) -> float:
        value = float(progress)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"progress must be between 0 and 1, got {progress}")
        return value


class TrainContext(_Reporting):
    """Reports of one trial run to the master (see the module contract)."""

    def __init__(
        self,
        session: Session,
        *,
        trial_id: int,
        trial_run_id: int,
        experiment_id: int,
        allocation_id: str,
        rank: int = 0,
        tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
        tensorboard_files: TensorboardFiles | None = None,
        reports_spool: Path | None = None,
    ) -> None:
        self._session = session
        self._trial_id = trial_id
        self._experiment_id = experiment_id
        self._tensorboard_path = Path(tempfile.gettempdir()) / f"tensorboard-{allocation_id}-{rank}"
        self._shipper = MetricsShipper(session, trial_id, trial_run_id, spool=reports_spool)
        self._tensorboard_mode = TensorboardMode(tensorboard_mode)
        self._rank = rank
        self._tensorboard = (
            TensorboardUploader(tensorboard_files, self._tensorboard_path, rank)
            if tensorboard_files is not None
            else None
        )

    @property
    def _auto_upload(self) -> TensorboardUploader | None:
        """The uploader when this process uploads automatically (AUTO mode, the chief)."""
        if self._tensorboard_mode is TensorboardMode.AUTO and self._rank == 0:
            return self._tensorboard
        return None

    def _after_report(self) -> None:
        if (uploader := self._auto_upload) is not None:
            uploader.sync()

    def _report(self, report: MetricsReport) -> None:
        logger.info(
            "report_metrics(group=%s, steps_completed=%d, metrics=%s)",
            report.group,
            report.steps_completed,
            report.metrics,
        )
        self._shipper.publish(report)

    def report_progress(self, progress: float) -> None:
        """Report how far the trial is, from 0 to 1 (the experiment's progress follows)."""
        value = self._check_progress(progress)
        self._session.post(
            f"/api/v1/trials/{self._trial_id}/progress", {"progress": value, "is_raw": True}
        )

    def get_experiment_best_validation(self) -> float | None:
        """The best ``searcher.metric`` value reported so far in the whole experiment (None when
        there is none yet)."""
        path = f"/api/v1/experiments/{self._experiment_id}/searcher/best_searcher_validation_metric"
        try:
            body = self._session.get(path)
        except errors.NotFoundError:
            return None
        metric = body.get("metric")
        return None if metric is None else float(metric)

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Tell the master the trial exits early (``INVALID_HP``: its hyperparameters are bad).
        A second report is ignored with a warning."""
        value = EarlyExitReason(reason).value
        logger.info("report_early_exit(%s)", value)
        try:
            self._session.post(f"/api/v1/trials/{self._trial_id}/early_exit", {"reason": value})
        except (errors.InvalidArgumentError, errors.FailedPreconditionError):
            logger.warning("early exit has already been reported for this trial, ignoring")

    def set_status(self, status: str) -> None:
        """A short string the UI shows for what the trial is doing."""
        self._session.post(f"/api/v1/trials/{self._trial_id}/runner/metadata", {"state": status})

    def set_metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any] | None:
        """Merge ``metadata`` into the run's metadata; the result."""
        body = self._session.post(
            f"/api/v1/runs/{self._trial_id}/metadata",
            {"metadata": jsonable(metadata, "metadata"), "runId": self._trial_id},
        )
        result = body.get("metadata")
        return dict(result) if isinstance(result, dict) else None

    def get_metadata(self) -> dict[str, Any] | None:
        """The run's metadata."""
        result = self._session.get(f"/api/v1/runs/{self._trial_id}/metadata").get("metadata")
        return dict(result) if isinstance(result, dict) else None

    def upload_tensorboard_files(
        self,
        selector: Callable[[Path], bool] = lambda _: True,
        mangler: Callable[[Path, int], Path] = lambda p, _: p,
    ) -> None:
        """Upload new and changed files under :meth:`get_tensorboard_path` (``MANUAL`` mode
        only; ``selector`` gets each file's path, ``mangler`` the relative path and the rank
        and names the stored file)."""
        if self._tensorboard_mode is TensorboardMode.AUTO:
            raise RuntimeError("upload_tensorboard_files can only be used in MANUAL mode")
        if self._tensorboard is None:
            raise ValueError("tensorboard manager is required for this method")
        self._tensorboard.sync(selector, mangler, force=True)

    def flush_metrics(self) -> None:
        """Wait until the metrics reported so far were posted (see
        :meth:`MetricsShipper.flush`)."""
        self._shipper.flush()

    def close(self, *, raise_errors: bool = True) -> None:
        """Upload the last TensorBoard files (AUTO mode, chief), then flush the queued metrics
        (see :meth:`MetricsShipper.close`)."""
        try:
            if (uploader := self._auto_upload) is not None:
                uploader.sync(force=True)
        finally:
            self._shipper.close(raise_errors=raise_errors)


class LocalTrainContext(_Reporting):
    """Off-cluster twin of :class:`TrainContext` (see the module contract)."""

    def __init__(self, tensorboard_path: Path | None = None) -> None:
        self.reports: list[MetricsReport] = []
        """Every report, in order."""
        self.progress: float | None = None
        """The last reported progress."""
        self._metadata: dict[str, Any] = {}
        self._tensorboard_path = tensorboard_path or Path(tempfile.gettempdir()) / "tensorboard"

    def _report(self, report: MetricsReport) -> None:
        self.reports.append(report)
        values = json.dumps(report.metrics, sort_keys=True)
        print(f"[{report.group}] steps_completed={report.steps_completed} {values}", flush=True)

    def report_progress(self, progress: float) -> None:
        self.progress = self._check_progress(progress)

    def get_experiment_best_validation(self) -> float | None:
        return None

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        logger.info("report_early_exit(%s)", EarlyExitReason(reason).value)

    def set_status(self, status: str) -> None:
        logger.info("status: %s", status)

    def set_metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any] | None:
        self._metadata.update(jsonable(metadata, "metadata"))
        return dict(self._metadata)

    def get_metadata(self) -> dict[str, Any] | None:
        return dict(self._metadata)

    def upload_tensorboard_files(
        self,
        selector: Callable[[Path], bool] = lambda _: True,
        mangler: Callable[[Path, int], Path] = lambda p, _: p,
    ) -> None:
        logger.info("upload_tensorboard_files()")

    def close(self, *, raise_errors: bool = True) -> None:
        """Nothing to flush."""
