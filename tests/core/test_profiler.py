"""The profiler: averaging, the metric groups (real psutil, a stand-in NVML), the sampling
thread, its cost, and that it never takes the training code's errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from stalwart.core import DummyProfilerContext, ProfilerContext
from stalwart.core._client import RetryPolicy, Session
from stalwart.core._metrics import MetricsShipper, background_reporter, prepare_report
from stalwart.core._profiler import average
from stalwart.core._sysmetrics import (
    CpuGroup,
    DiskGroup,
    GpuGroup,
    MemoryGroup,
    MetricGroup,
    NetworkGroup,
    Sample,
)

WAIT_S = 10.0


class Reports:
    """Collects ``report_metrics`` calls; ``wait(n)`` blocks until ``n`` have arrived."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []
        self._cond = threading.Condition()

    def __call__(self, group: str, steps: int, metrics: Mapping[str, Any]) -> None:
        with self._cond:
            self.calls.append((group, steps, dict(metrics)))
            self._cond.notify_all()

    def wait(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.calls) >= count, WAIT_S), self.calls

    def groups(self) -> set[str]:
        return {group for group, _, _ in self.calls}


class FakeNvml:
    """Stands in for the ``pynvml`` module: two GPUs whose strings come back as bytes (as the
    old pynvml 11.4.1 returns them)."""

    class NVMLError(Exception):
        pass

    def __init__(self, *, broken_index: int | None = None, init_fails: bool = False) -> None:
        self.broken_index = broken_index
        self.init_fails = init_fails
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index == self.broken_index:
            raise self.NVMLError("GPU is lost")
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return f"GPU-{handle}".encode()

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=50 + handle, memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(free=1000 * (handle + 1), total=5000, used=0)


class StaticGroup:
    def __init__(self, name: str, value: float, fail: bool = False) -> None:
        self.name = name
        self.value = value
        self.fail = fail
        self.closed = False

    def sample(self) -> Sample | None:
        if self.fail:
            raise OSError("no /proc here")
        return {"v": self.value}

    def close(self) -> None:
        self.closed = True


def test_average() -> None:
    assert average([]) == {}
    assert average([{"a": 1, "b": 2.0}, {"a": 3}]) == {"a": 2.0, "b": 2.0}
    nested = average([{"g": {"u": 10, "m": 1}}, {"g": {"u": 20}}, {"x": 1}])
    assert nested == {"g": {"u": 15.0, "m": 1.0}, "x": 1.0}
    assert average([{"a": "text", "b": True, "c": {}}]) == {}


def test_system_groups_sample_real_values(tmp_path: Any) -> None:
    cpu = CpuGroup().sample()
    assert cpu is not None
    assert 0.0 <= cpu["cpu_util_simple"] <= 100.0
    memory = MemoryGroup().sample()
    assert memory is not None
    assert memory["memory_free"] > 0
    disk = DiskGroup(["/", str(tmp_path), "/no/such/path"]).sample()
    assert disk is not None
    assert 0.0 <= disk["/"]["disk_util"] <= 100.0
    assert str(tmp_path) in disk
    assert "/no/such/path" not in disk
    net = NetworkGroup()
    sample = net.sample()
    assert sample is not None
    assert sample.keys() == {"net_throughput_sent", "net_throughput_recv"}
    assert all(v >= 0 for v in sample.values())


def test_gpu_group_decodes_bytes() -> None:
    nvml = FakeNvml()
    gpu = GpuGroup(nvml)
    assert gpu.names == {"GPU-0": "NVIDIA H200", "GPU-1": "NVIDIA H200"}
    sample = gpu.sample()
    assert sample == {
        "GPU-0": {"gpu_util": 50.0, "gpu_free_memory": 1000.0},
        "GPU-1": {"gpu_util": 51.0, "gpu_free_memory": 2000.0},
    }
    json.dumps(sample)  # plain strings as keys
    gpu.close()
    gpu.close()
    assert nvml.shutdowns == 1
    assert gpu.sample() is None


def test_gpu_group_without_nvml_or_with_a_broken_gpu() -> None:
    assert GpuGroup(None).sample() is None
    assert GpuGroup(FakeNvml(init_fails=True)).sample() is None
    broken = GpuGroup(FakeNvml(broken_index=1))  # one GPU fails: no GPU metrics at all
    assert broken.sample() is None
    assert broken.names == {}


def profiler(
    reports: Reports,
    groups: list[MetricGroup],
    local_rank: int = 0,
    steps: int = 12,
) -> ProfilerContext:
    return ProfilerContext(
        reports,
        lambda: steps,
        local_rank,
        "agent-1",
        groups=lambda: groups,
    )


def test_reports_averages_per_group() -> None:
    reports = Reports()
    cpu, empty = StaticGroup("cpu", 3.0), StaticGroup("gpu", 0.0)
    empty.sample = lambda: None  # type: ignore[method-assign]
    prof = profiler(reports, [empty, cpu])
    prof.on(sampling_interval=0.1, samples_per_report=2)
    prof.on()  # already on: nothing changes
    reports.wait(1)
    prof.off()
    assert reports.calls[0] == ("cpu", 12, {"agent-1": {"v": 3.0}})
    assert reports.groups() == {"cpu"}  # a group with nothing to say is not reported
    assert cpu.closed
    sampler = prof.sampler
    assert sampler is not None
    assert not sampler.is_alive()
    prof.off()  # idempotent


def test_off_reports_what_is_pending() -> None:
    reports = Reports()
    prof = profiler(reports, [StaticGroup("memory", 1.0)])
    prof.on(sampling_interval=60, samples_per_report=10)  # would report in ten minutes
    prof.off()
    assert reports.calls == [("memory", 12, {"agent-1": {"v": 1.0}})]


def test_failures_stay_in_the_thread(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(group: str, steps: int, metrics: Mapping[str, Any]) -> None:
        raise RuntimeError("metrics cannot be reported after the context was closed")

    prof = ProfilerContext(
        refuse,
        lambda: 0,
        0,
        "a",
        groups=lambda: [StaticGroup("disk", 1.0, fail=True), StaticGroup("cpu", 1.0)],
    )
    prof.on(sampling_interval=0.1, samples_per_report=1)
    prof.off()
    assert "sampling disk failed (no /proc here); dropping it" in caplog.text
    assert "reporting cpu failed" in caplog.text


def test_only_local_rank_zero_samples() -> None:
    reports = Reports()
    prof = profiler(reports, [StaticGroup("cpu", 1.0)], local_rank=1)
    prof.on(sampling_interval=0.1)
    assert prof.sampler is None
    prof.off()
    assert reports.calls == []


def test_arguments_and_config_switch() -> None:
    prof = profiler(Reports(), [])
    with pytest.raises(ValueError, match="Sampling interval"):
        prof.on(sampling_interval=0.01)
    with pytest.raises(ValueError, match="samples_per_report"):
        prof.on(samples_per_report=0)
    prof.start()  # not enabled by the config: nothing starts
    assert prof.sampler is None
    prof.enabled = True
    prof.start()
    assert prof.sampler is not None
    prof.close()
    dummy = DummyProfilerContext()
    dummy.on()
    dummy.start()
    dummy.off()


def test_sampling_costs_under_one_percent_of_a_core() -> None:
    reports = Reports()
    prof = ProfilerContext(reports, lambda: 0, 0, "a")  # the real groups
    prof.on(sampling_interval=0.1, samples_per_report=5)
    reports.wait(6)  # two reports of cpu, memory and network (disk and gpu where there are)
    prof.off()
    sampler = prof.sampler
    assert sampler is not None
    per_sample = sampler.cpu_seconds / sampler.samples
    # at the default one sample per second, 1% of one core is 10 ms per sample
    assert per_sample < 0.010, f"{per_sample * 1e3:.2f} ms of CPU per sample"
    assert {"cpu", "memory", "network"} <= reports.groups()


def test_a_background_reporter_leaves_errors_to_the_training_code() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"message": "invalid run id"})

    retry = RetryPolicy(initial_backoff_s=0.001, max_backoff_s=0.01, deadline_s=5.0)
    session = Session("http://m:8080", "tok", retry=retry, transport=httpx.MockTransport(handler))
    shipper = MetricsShipper(session, trial_id=7, trial_run_id=2)
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    deadline = time.monotonic() + WAIT_S
    while shipper.dropped == 0:  # the refusal has been recorded
        assert time.monotonic() < deadline
        time.sleep(0.01)

    done = threading.Event()

    def profiler_thread() -> None:
        with background_reporter():
            shipper.publish(prepare_report("cpu", 1, {"a": {"cpu_util_simple": 1.0}}))
        done.set()

    thread = threading.Thread(target=profiler_thread)
    thread.start()
    thread.join(WAIT_S)
    assert done.is_set()  # it did not raise there...
    with pytest.raises(Exception, match="invalid run id"):
        shipper.close()  # ...the training code gets it
    session.close()
