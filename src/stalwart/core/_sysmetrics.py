"""The profiler's metric groups: what one sample of each reads (Determined 0.38's names).

Contract:

- Each group has a ``name`` (the metrics group it is reported in) and ``sample()``, which
  returns one sample (a dict of floats, or of dicts of floats one level down) or None when it
  has nothing to say. Samples are cheap: a few reads of ``/proc`` or NVML calls, no sleeping.
- Rates (bytes/s, operations/s) are over the time since the previous sample of the same group;
  the first sample of a rate group only sets its baseline.
- ``cpu``: ``cpu_util_simple`` (percent of all cores). ``memory``: ``memory_free`` (GB
  available). ``disk``: ``disk_iops``, ``disk_throughput_read``/``_write`` (bytes/s) and
  ``{path: {disk_util}}`` (percent used). ``network``: ``net_throughput_sent``/``_recv``
  (bytes/s). ``gpu``: ``{uuid: {gpu_util, gpu_free_memory}}`` (percent, bytes) per NVIDIA GPU.
- :class:`GpuGroup` uses NVML (the ``pynvml`` module of nvidia-ml-py) when it is importable and
  every GPU answers; otherwise it samples nothing. Names and UUIDs that come back as ``bytes``
  (older ``pynvml`` packages) are decoded.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

import psutil

__all__ = [
    "CpuGroup",
    "DiskGroup",
    "GpuGroup",
    "MemoryGroup",
    "MetricGroup",
    "NetworkGroup",
    "Sample",
    "default_groups",
    "load_nvml",
]

logger = logging.getLogger("stalwart.core")

Sample = dict[str, Any]
"""Metric name (or label) -> float (or a dict of floats)."""


class MetricGroup(Protocol):
    """One metrics group of the profiler."""

    name: str

    def sample(self) -> Sample | None:
        """One sample now (None: nothing to report this time)."""

    def close(self) -> None:
        """Release what the group holds (NVML)."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class CpuGroup:
    """``cpu``: utilisation of all cores since the previous sample."""

    name = "cpu"

    def __init__(self) -> None:
        psutil.cpu_percent(interval=None)  # the baseline of the first sample

    def sample(self) -> Sample | None:
        return {"cpu_util_simple": float(psutil.cpu_percent(interval=None))}

    def close(self) -> None:
        """Nothing to release."""


class MemoryGroup:
    """``memory``: memory available to new processes, in GB."""

    name = "memory"

    def sample(self) -> Sample | None:
        return {"memory_free": psutil.virtual_memory().available / 1e9}

    def close(self) -> None:
        """Nothing to release."""


class _Rates:
    """Per-second rates of counters between two calls."""

    def __init__(self) -> None:
        self._last: tuple[float, dict[str, float]] | None = None

    def update(self, counters: dict[str, float]) -> dict[str, float] | None:
        now = time.monotonic()
        last, self._last = self._last, (now, counters)
        if last is None or now <= last[0]:
            return None
        span = now - last[0]
        return {k: max(0.0, (v - last[1].get(k, v)) / span) for k, v in counters.items()}


class DiskGroup:
    """``disk``: I/O rates of all disks and how full the file systems of ``paths`` are."""

    name = "disk"

    def __init__(self, paths: Sequence[str] = ("/",)) -> None:
        self._paths = []
        for path in paths:
            try:
                psutil.disk_usage(path)
                self._paths.append(path)
            except OSError:
                logger.debug("profiler: no disk usage for %s", path)
        self._rates = _Rates()
        self._rates.update(self._counters() or {})

    @staticmethod
    def _counters() -> dict[str, float] | None:
        io = psutil.disk_io_counters()
        if io is None:  # no /proc/diskstats (some containers)
            return None
        return {
            "disk_iops": float(io.read_count + io.write_count),
            "disk_throughput_read": float(io.read_bytes),
            "disk_throughput_write": float(io.write_bytes),
        }

    def sample(self) -> Sample | None:
        out: Sample = {}
        counters = self._counters()
        if counters is not None:
            out.update(self._rates.update(counters) or {})
        for path in self._paths:
            out[path] = {"disk_util": float(psutil.disk_usage(path).percent)}
        return out or None

    def close(self) -> None:
        """Nothing to release."""


class NetworkGroup:
    """``network``: bytes/s sent and received over all interfaces."""

    name = "network"

    def __init__(self) -> None:
        self._rates = _Rates()
        self._rates.update(self._counters() or {})

    @staticmethod
    def _counters() -> dict[str, float] | None:
        io = psutil.net_io_counters()
        if io is None:
            return None
        return {
            "net_throughput_sent": float(io.bytes_sent),
            "net_throughput_recv": float(io.bytes_recv),
        }

    def sample(self) -> Sample | None:
        counters = self._counters()
        return None if counters is None else self._rates.update(counters)

    def close(self) -> None:
        """Nothing to release."""


def load_nvml() -> Any | None:
    """The ``pynvml`` module, or None when nvidia-ml-py is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


class GpuGroup:
    """``gpu``: utilisation and free memory of every NVIDIA GPU, by UUID (see the contract).

    ``nvml`` is the ``pynvml`` module (or a stand-in with the same functions, in tests).
    """

    name = "gpu"

    def __init__(self, nvml: Any | None) -> None:
        self._nvml = nvml
        self._handles: dict[str, Any] = {}
        self.names: dict[str, str] = {}
        """GPU UUID -> product name, for logs."""
        if nvml is None:
            return
        try:
            nvml.nvmlInit()
        except Exception as exc:  # no driver or no library: no NVIDIA GPUs to profile
            logger.info("profiler: NVML unavailable (%s); no GPU metrics", exc)
            self._nvml = None
            return
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                self.names[uuid] = _text(nvml.nvmlDeviceGetName(handle))
                nvml.nvmlDeviceGetUtilizationRates(handle)
                nvml.nvmlDeviceGetMemoryInfo(handle)
                self._handles[uuid] = handle
        except Exception as exc:  # one GPU that does not answer: no GPU metrics at all
            logger.info("profiler: NVML failed (%s); no GPU metrics", exc)
            self._handles, self.names = {}, {}
        if self._handles:
            found = ", ".join(f"{name} ({uuid})" for uuid, name in self.names.items())
            logger.info("profiler: sampling GPUs %s", found)

    def sample(self) -> Sample | None:
        if not self._handles or self._nvml is None:
            return None
        out: Sample = {}
        for uuid, handle in self._handles.items():
            out[uuid] = {
                "gpu_util": float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                "gpu_free_memory": float(self._nvml.nvmlDeviceGetMemoryInfo(handle).free),
            }
        return out

    def close(self) -> None:
        """Shut NVML down (once)."""
        nvml, self._nvml, self._handles = self._nvml, None, {}
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception as exc:
                logger.debug("profiler: nvmlShutdown failed: %s", exc)


def default_groups(nvml: Any | None = None) -> list[MetricGroup]:
    """Every group, GPU first (as Determined orders them); ``nvml`` defaults to
    :func:`load_nvml`."""
    return [
        GpuGroup(nvml if nvml is not None else load_nvml()),
        CpuGroup(),
        MemoryGroup(),
        DiskGroup(),
        NetworkGroup(),
    ]
