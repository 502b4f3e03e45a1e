"""``ProfilerContext``: system metrics of a trial, sampled in the background (Determined's
``core_context.profiler``).

Contract:

- ``on(sampling_interval=1, samples_per_report=10)`` starts one daemon thread
  (``stalwart-profiler``) on local rank 0 (other ranks: a no-op, the metrics are per machine).
  Every ``sampling_interval`` seconds it samples each group of :mod:`stalwart.core._sysmetrics`;
  every ``samples_per_report`` samples it averages them (:func:`average`) and reports each group
  that has something as ``report(group, steps, {agent_id: averaged})``: the train context's
  ``report_metrics``, so the reports travel with the trial's other metrics. ``steps`` is the
  latest reported training step.
- ``on()`` while on and ``off()`` while off do nothing. ``off()`` takes one last sample,
  reports what is pending (so a short run still gets one report per group), and joins the
  thread. ``core.init()`` turns it on when the experiment config has ``profiling.enabled``;
  leaving the ``with`` block turns it off.
- The thread never raises into the training code: a group whose sampling fails is logged and
  dropped, a report that fails is logged, and a metrics error the shipper holds stays pending
  for the training code (the thread reports as a background reporter).
- Cost: a sample of every group takes well under a millisecond of CPU (``/proc`` reads, NVML
  calls): at one sample per second that is under 0.1% of one core. ``cpu_seconds`` counts it.
- :class:`DummyProfilerContext` is the off-cluster twin: ``on``/``off`` do nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stalwart.core._metrics import background_reporter

if TYPE_CHECKING:  # psutil is imported when profiling starts, not with stalwart.core
    from stalwart.core._sysmetrics import MetricGroup

Sample = dict[str, Any]

__all__ = ["DummyProfilerContext", "ProfilerContext", "average"]

logger = logging.getLogger("stalwart.core")

Report = Callable[[str, int, Mapping[str, Any]], None]
"""``report_metrics(group, steps_completed, metrics)``."""


def average(samples: Sequence[Sample]) -> Sample:
    """The mean of each metric over the samples that have it, nested dicts averaged key by key
    (values that are not numbers are left out)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    nested: dict[str, list[Sample]] = {}
    for sample in samples:
        for key, value in sample.items():
            if isinstance(value, dict):
                nested.setdefault(key, []).append(value)
            elif isinstance(value, int | float) and not isinstance(value, bool):
                sums[key] = sums.get(key, 0.0) + float(value)
                counts[key] = counts.get(key, 0) + 1
    out: Sample = {key: sums[key] / counts[key] for key in sums}
    for key, values in nested.items():
        inner = average(values)
        if inner:
            out[key] = inner
    return out


class _Sampler(threading.Thread):
    """The profiler thread: samples, averages, reports (see the module contract)."""

    def __init__(
        self,
        groups: list[MetricGroup],
        report: Report,
        steps: Callable[[], int],
        agent_id: str,
        sampling_interval: float,
        samples_per_report: int,
    ) -> None:
        super().__init__(name="stalwart-profiler", daemon=True)
        self._groups = groups
        self._report = report
        self._steps = steps
        self._agent_id = agent_id
        self._interval = sampling_interval
        self._per_report = samples_per_report
        self._stopping = threading.Event()
        self._pending: dict[str, list[Sample]] = {}
        self._taken = 0
        self.cpu_seconds = 0.0
        """CPU time this thread spent sampling and reporting."""
        self.samples = 0
        """Samples taken (all groups at once count one)."""

    def stop(self) -> None:
        self._stopping.set()
        self.join()

    def run(self) -> None:
        with background_reporter():
            next_at = time.monotonic() + self._interval
            while not self._stopping.wait(max(0.0, next_at - time.monotonic())):
                next_at += self._interval
                self._timed(self._sample)
                if self._taken >= self._per_report:
                    self._timed(self._flush)
            self._timed(self._sample)
            self._timed(self._flush)
            for group in self._groups:
                group.close()

    def _timed(self, step: Callable[[], None]) -> None:
        started = time.thread_time()
        step()
        self.cpu_seconds += time.thread_time() - started

    def _sample(self) -> None:
        self.samples += 1
        self._taken += 1
        for group in list(self._groups):
            try:
                value = group.sample()
            except Exception as exc:
                logger.warning("profiler: sampling %s failed (%s); dropping it", group.name, exc)
                self._groups.remove(group)
                continue
            if value:
                self._pending.setdefault(group.name, []).append(value)

    def _flush(self) -> None:
        pending, self._pending, self._taken = self._pending, {}, 0
        if not pending:
            return
        steps = self._steps()
        for name, samples in pending.items():
            metrics = average(samples)
            if not metrics:
                continue
            try:
                self._report(name, steps, {self._agent_id: metrics})
            except Exception as exc:
                logger.warning("profiler: reporting %s failed: %s", name, exc)


class ProfilerContext:
    """System-metrics profiling of this trial (see the module contract).

    ``report`` is the train context's ``report_metrics``; ``steps`` gives the latest training
    step; ``local_rank`` is this worker's rank on its machine; ``groups`` makes the metric
    groups (default: every group of :mod:`stalwart.core._sysmetrics`).
    """

    def __init__(
        self,
        report: Report,
        steps: Callable[[], int],
        local_rank: int,
        agent_id: str,
        *,
        enabled: bool = False,
        groups: Callable[[], list[MetricGroup]] | None = None,
    ) -> None:
        self._report = report
        self._steps = steps
        self._local_rank = local_rank
        self._agent_id = agent_id
        self._groups = groups
        self.enabled = enabled
        """Whether the experiment config asks for profiling (``profiling.enabled``)."""
        self._sampler: _Sampler | None = None
        self._lock = threading.Lock()

    @property
    def sampler(self) -> _Sampler | None:
        """The running (or last) profiler thread, if any."""
        return self._sampler

    def start(self) -> None:
        """Turn profiling on if the experiment config asks for it (``Context.start``)."""
        if self.enabled:
            self.on()

    def on(self, sampling_interval: float = 1, samples_per_report: int = 10) -> None:
        """Start profiling (see the module contract); ValueError for an interval under 0.1 s
        or a count under 1."""
        if sampling_interval < 0.1:
            raise ValueError(f"Sampling interval must be > 0.1, got {sampling_interval}.")
        if not isinstance(samples_per_report, int) or samples_per_report < 1:
            raise ValueError(f"samples_per_report must be an int >= 1, got {samples_per_report}")
        if self._local_rank != 0:
            return
        with self._lock:
            if self._sampler is not None and self._sampler.is_alive():
                return
            logger.info("Starting system metrics profiling.")
            if self._groups is None:
                from stalwart.core._sysmetrics import default_groups

                self._groups = default_groups
            self._sampler = _Sampler(
                self._groups(),
                self._report,
                self._steps,
                self._agent_id,
                sampling_interval,
                samples_per_report,
            )
            self._sampler.start()

    def off(self) -> None:
        """Stop profiling after reporting what is pending (idempotent)."""
        with self._lock:
            sampler = self._sampler
            if sampler is None or not sampler.is_alive():
                return
            sampler.stop()
        logger.info(
            "Stopped system metrics profiling (%d samples, %.3f s of CPU).",
            sampler.samples,
            sampler.cpu_seconds,
        )

    def close(self) -> None:
        """:meth:`off` (``Context.close``)."""
        self.off()


class DummyProfilerContext:
    """Off-cluster twin of :class:`ProfilerContext`: nothing is sampled."""

    enabled = False

    def start(self) -> None:
        """Nothing to start."""

    def on(self, sampling_interval: float = 1, samples_per_report: int = 10) -> None:
        """Accepted; nothing is sampled off-cluster."""

    def off(self) -> None:
        """Nothing to stop."""

    def close(self) -> None:
        """Nothing to stop."""
