"""The metric stream as Stalwart first wrote it (ORM objects through the wire models): the
reference the fast read path (:func:`stalwart.master.services.metrics.iter_report_rows` and the
streams' hand-written lines) must match, kept here for the tests only."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import and_, or_, select

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.trials import MetricsReport
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import MetricReport
from stalwart.master.services import metrics as metrics_svc

__all__ = ["iter_metric_reports", "report_to_wire"]


def report_to_wire(report: MetricReport) -> MetricsReport:
    """A stored report as ``v1MetricsReport``: the reference the streams' lines
    (`_stream_line` in the trials API) are written to match."""
    if report.group == metrics_svc.VALIDATION:
        metrics: dict[str, Any] = {"validation_metrics": report.metrics or {}}
    else:
        metrics = {"avg_metrics": report.metrics or {}, "batch_metrics": report.batch_metrics}
    return MetricsReport(
        id=report.id,
        trial_id=report.trial_id,
        trial_run_id=report.trial_run_id,
        group=report.group,
        total_batches=report.steps_completed,
        end_time=wire_time(report.report_time) or "",
        archived=report.archived,
        metrics=metrics,
    )


def iter_metric_reports(
    sessions: SessionFactory,
    trial_ids: Sequence[int],
    group: str,
    batch: int = metrics_svc.STREAM_BATCH,
) -> Iterator[list[MetricReport]]:
    """Batches of the trials' live (not archived) reports of ``group``, trial by trial, in step
    order; each batch is read in its own short session (keyset paging on the series index)."""
    for trial_id in trial_ids:
        last: tuple[int, int] | None = None
        while True:
            query = select(MetricReport).where(
                MetricReport.trial_id == trial_id,
                MetricReport.group == group,
                MetricReport.archived.is_(False),
            )
            if last is not None:
                query = query.where(
                    or_(
                        MetricReport.steps_completed > last[0],
                        and_(MetricReport.steps_completed == last[0], MetricReport.id > last[1]),
                    )
                )
            query = query.order_by(MetricReport.steps_completed, MetricReport.id).limit(batch)
            with sessions() as session:
                rows = list(session.scalars(query))
                session.expunge_all()
            if not rows:
                break
            yield rows
            if len(rows) < batch:
                break
            last = (rows[-1].steps_completed, rows[-1].id)
