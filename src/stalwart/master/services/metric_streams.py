"""The experiment metric streams of Determined's web UI (``/experiments/metrics-stream/...``):
metric names, batches, a snapshot of trials at some batches, and a sample of the best
trials' curves.

Each stream is an object whose :meth:`step` is called once, then again every period while
the experiment (any of them, for names) is not terminal; a step answers only what is new
since the last one (Determined's incremental semantics): names and batches not given before,
reports newer than the last step, trials promoted into or demoted from the sample. Reports
are followed by id, so a step reads only the reports added since the previous one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import Experiment, MetricReport, Trial
from stalwart.master.services.metrics import TRAINING, VALIDATION, parse_metric_value
from stalwart.master.services.trial_series import Point, trial_groups
from stalwart.master.transitions import EXPERIMENT_TERMINAL
from stalwart.master.ui.series import metric_names

__all__ = [
    "BatchesStream",
    "NamesStream",
    "SampleStream",
    "SnapshotStream",
    "metric_group",
]

_BY_LENGTH = frozenset({"async_halving", "adaptive_asha", "adaptive", "adaptive_simple"})
"""Searchers whose best trials are the longest trained (Determined's ranking)."""


def metric_group(metric_type: str | None, group: str | None) -> str:
    """The group a stream request names (``metricType`` wins); 400 when it names none."""
    if metric_type == "METRIC_TYPE_TRAINING":
        return TRAINING
    if metric_type == "METRIC_TYPE_VALIDATION":
        return VALIDATION
    if metric_type == "METRIC_TYPE_PROFILING":
        return "profiling"
    if not group:
        raise InvalidArgumentError("must specify a metric group (group or metricType)")
    return group


def _experiment(session: Session, experiment_id: int) -> Experiment:
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    return experiment


def _over(session: Session, experiment_ids: Sequence[int]) -> bool:
    states = session.scalars(select(Experiment.state).where(Experiment.id.in_(experiment_ids)))
    return all(state in EXPERIMENT_TERMINAL for state in states)


def _trials_of(experiment_ids: Sequence[int]) -> Select[int]:
    return select(Trial.id).where(Trial.experiment_id.in_(list(experiment_ids)))


@dataclass
class NamesStream:
    """``ExpMetricNames``: the metric names of the experiments' reports, per group."""

    experiment_ids: list[int]
    _seen: dict[str, set[str]] = field(default_factory=dict)
    _started: bool = False

    def step(self, session: Session) -> tuple[dict[str, Any], bool]:
        """``(response fields, done)``: the names not given before."""
        out: dict[str, Any] = {
            "searcher_metrics": [],
            "training_metrics": [],
            "validation_metrics": [],
            "metric_names": [],
        }
        if not self._started:
            for experiment_id in self.experiment_ids:
                metric = _experiment(session, experiment_id).config.get("searcher", {})
                name = metric.get("metric") if isinstance(metric, dict) else None
                if isinstance(name, str) and name not in out["searcher_metrics"]:
                    out["searcher_metrics"].append(name)
            self._started = True
        names = metric_names(session, _trials_of(self.experiment_ids))
        for group, found in names.items():
            seen = self._seen.setdefault(group, set())
            for name in found:
                if name in seen:
                    continue
                seen.add(name)
                out["metric_names"].append({"group": group, "name": name})
                if group in (TRAINING, VALIDATION):
                    out[f"{group}_metrics"].append(name)
        return out, _over(session, self.experiment_ids)


@dataclass
class _Follow:
    """Reports of an experiment's trials of one group, followed by id."""

    experiment_id: int
    metric: str
    group: str
    _last: int = 0

    def new_reports(self, session: Session, *conditions: Any) -> list[tuple[Any, ...]]:
        query = (
            select(
                MetricReport.id,
                MetricReport.trial_id,
                MetricReport.steps_completed,
                MetricReport.metrics,
            )
            .where(
                MetricReport.trial_id.in_(_trials_of([self.experiment_id])),
                MetricReport.group == self.group,
                MetricReport.archived.is_(False),
                MetricReport.id > self._last,
                *conditions,
            )
            .order_by(MetricReport.id)
        )
        rows = [tuple(r) for r in session.execute(query)]
        if rows:
            self._last = int(rows[-1][0])
        return [r for r in rows if self.metric in (r[3] or {})]


@dataclass
class BatchesStream(_Follow):
    """``MetricBatches``: the batch counts at which the metric was reported."""

    _seen: set[int] = field(default_factory=set)

    def step(self, session: Session) -> tuple[dict[str, Any], bool]:
        """``(response fields, done)``: batch counts not given before, ascending."""
        experiment = _experiment(session, self.experiment_id)
        batches = sorted({int(r[2]) for r in self.new_reports(session)} - self._seen)
        self._seen.update(batches)
        return {"batches": batches}, experiment.state in EXPERIMENT_TERMINAL


@dataclass
class SnapshotStream(_Follow):
    """``TrialsSnapshot``: each trial's metric value at ``batches`` (within ``margin``)."""

    batches: int = 0
    margin: int = 0

    def step(self, session: Session) -> tuple[dict[str, Any], bool]:
        """``(response fields, done)``: trials with a new report in the window."""
        if self.margin > 100:
            raise InvalidArgumentError("margin must be <= 100")
        experiment = _experiment(session, self.experiment_id)
        low = max(0, self.batches - self.margin)
        high = self.batches + self.margin
        latest: dict[int, tuple[int, float]] = {}
        for _, trial_id, steps, metrics in self.new_reports(
            session,
            MetricReport.steps_completed >= low,
            MetricReport.steps_completed <= high,
        ):
            value = parse_metric_value(metrics.get(self.metric))
            if value is not None:
                latest[int(trial_id)] = (int(steps), value)
        rows = session.execute(select(Trial.id, Trial.hparams).where(Trial.id.in_(list(latest))))
        hparams = {int(trial_id): params for trial_id, params in rows}
        trials = [
            {
                "trial_id": trial_id,
                "hparams": hparams.get(trial_id) or {},
                "metric": value,
                "batches_processed": steps,
            }
            for trial_id, (steps, value) in sorted(latest.items())
        ]
        return {"trials": trials}, experiment.state in EXPERIMENT_TERMINAL


@dataclass
class SampleStream:
    """``TrialsSample``: the curves of the experiment's best ``max_trials`` trials (by their
    searcher metric; by training length for the halving searchers). A trial's curve is sent
    when it enters the sample (``promoted``); later steps name the trials that entered or
    left it (``demoted``)."""

    experiment_id: int
    metric: str
    group: str
    max_trials: int = 25
    max_points: int = 1000
    start_batches: int = 0
    end_batches: int = 0
    _current: set[int] = field(default_factory=set)

    def _top(self, session: Session, experiment: Experiment) -> list[Trial]:
        query = select(Trial).where(Trial.experiment_id == experiment.id)
        if experiment.searcher_type in _BY_LENGTH:
            query = query.order_by(Trial.total_batches.desc(), Trial.id)
        else:
            searcher = experiment.config.get("searcher") or {}
            smaller = bool(searcher.get("smaller_is_better", True))
            value = Trial.searcher_metric_value
            query = query.order_by(
                value.is_(None), value.asc() if smaller else value.desc(), Trial.id
            )
        return list(session.scalars(query.limit(self.max_trials)))

    def step(self, session: Session) -> tuple[dict[str, Any], bool]:
        """``(response fields, done)``."""
        experiment = _experiment(session, self.experiment_id)
        top = self._top(session, experiment)
        trials: list[dict[str, Any]] = []
        promoted: list[int] = []
        for trial in top:
            entry: dict[str, Any] = {"trial_id": trial.id, "hparams": {}, "data": []}
            if trial.id not in self._current:
                promoted.append(trial.id)
                entry["hparams"] = trial.hparams or {}
                entry["data"] = self._curve(session, trial.id)
            trials.append(entry)
        kept = {t.id for t in top}
        demoted = sorted(self._current - kept)
        self._current = kept
        body = {"trials": trials, "promoted_trials": promoted, "demoted_trials": demoted}
        return body, experiment.state in EXPERIMENT_TERMINAL

    def _curve(self, session: Session, trial_id: int) -> list[Point]:
        groups = trial_groups(
            session,
            trial_id,
            {self.group: [self.metric]},
            max_points=self.max_points,
            start_batches=self.start_batches,
            end_batches=self.end_batches,
        )
        return groups[0].points if groups else []
