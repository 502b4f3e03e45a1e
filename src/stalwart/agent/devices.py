"""Slot detection: NVIDIA GPUs, AMD ROCm GPUs, or CPU slots.

Order of preference (unless ``slot_type`` forces one): NVIDIA GPUs through nvidia-ml-py
(``pynvml``, the ``gpu`` extra) or else ``nvidia-smi``; AMD GPUs through ``rocm-smi`` or else
``/sys/class/kfd``; otherwise CPU slots, one per agent by default (Determined's behaviour).
``slots`` overrides the count: N CPU slots, or the first N GPUs.

The probes are thin and best effort (a missing tool means "none found"); the parsers are pure
functions tested against captured output.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from stalwart.agent.protocol import DeviceType, SlotInfo
from stalwart.errors import FailedPreconditionError

__all__ = [
    "detect_slots",
    "parse_cpu_model",
    "parse_kfd_node",
    "parse_nvidia_smi_csv",
    "parse_rocm_smi_json",
    "probe_nvidia",
    "probe_rocm",
    "select_slots",
]

log = logging.getLogger(__name__)

Probe = Callable[[], list[SlotInfo]]

NVIDIA_SMI_ARGV = ["nvidia-smi", "--query-gpu=index,name,uuid", "--format=csv,noheader"]
ROCM_SMI_ARGV = ["rocm-smi", "--showuniqueid", "--showproductname", "--json"]
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
_TOOL_TIMEOUT_S = 20


def parse_nvidia_smi_csv(text: str) -> list[SlotInfo]:
    """GPUs from ``nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader``."""
    slots = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        index, uuid = fields[0], fields[-1]
        name = ", ".join(fields[1:-1])
        slots.append(SlotInfo(id=index, device_type="cuda", brand=name, uuid=uuid))
    return slots


def _card_index(key: str) -> int | None:
    suffix = key.removeprefix("card")
    return int(suffix) if key.startswith("card") and suffix.isdigit() else None


def parse_rocm_smi_json(text: str) -> list[SlotInfo]:
    """GPUs from ``rocm-smi --showuniqueid --showproductname --json`` (keys ``card<N>``)."""
    data = json.loads(text)
    if not isinstance(data, dict):
        return []
    slots = []
    for key, card in data.items():
        index = _card_index(key)
        if index is None or not isinstance(card, dict):
            continue
        fields = {str(k).lower(): str(v) for k, v in card.items()}
        brand = fields.get("card series") or fields.get("device name") or fields.get("card model")
        uuid = fields.get("unique id", "")
        slots.append(SlotInfo(id=str(index), device_type="rocm", brand=brand or "", uuid=uuid))
    return sorted(slots, key=lambda slot: int(slot.id))


def parse_kfd_node(properties: str, name: str = "") -> tuple[bool, str]:
    """``(is_gpu, unique_id)`` of one ``/sys/class/kfd/kfd/topology/nodes/<n>/properties``.

    A node is a GPU when its ``simd_count`` is positive (CPU nodes have none).
    """
    values: dict[str, str] = {}
    for line in properties.splitlines():
        key, _, value = line.strip().partition(" ")
        values[key] = value.strip()
    try:
        simd = int(values.get("simd_count", "0"))
    except ValueError:
        simd = 0
    unique = values.get("unique_id", "")
    return simd > 0, (f"0x{int(unique):x}" if unique.isdigit() and unique != "0" else "")


def parse_cpu_model(cpuinfo: str) -> str:
    """The first ``model name`` of ``/proc/cpuinfo`` (empty when absent)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name":
            return value.strip()
    return ""


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _probe_pynvml() -> list[SlotInfo] | None:
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver / no library: no NVIDIA GPUs
        return []
    try:
        slots = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name, uuid = pynvml.nvmlDeviceGetName(handle), pynvml.nvmlDeviceGetUUID(handle)
            slots.append(
                SlotInfo(
                    id=str(index),
                    device_type="cuda",
                    brand=name.decode() if isinstance(name, bytes) else str(name),
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                )
            )
        return slots
    finally:
        pynvml.nvmlShutdown()


def probe_nvidia() -> list[SlotInfo]:
    """NVIDIA GPUs via pynvml when installed, else via ``nvidia-smi``; [] when none."""
    found = _probe_pynvml()
    if found is not None:
        return found
    text = _run(NVIDIA_SMI_ARGV)
    return parse_nvidia_smi_csv(text) if text else []


def probe_rocm() -> list[SlotInfo]:
    """AMD GPUs via ``rocm-smi``, else from the kfd topology; [] when none."""
    text = _run(ROCM_SMI_ARGV)
    if text:
        try:
            return parse_rocm_smi_json(text)
        except ValueError:
            log.warning("cannot parse rocm-smi output; trying %s", KFD_NODES)
    slots: list[SlotInfo] = []
    if not KFD_NODES.is_dir():
        return slots
    nodes = sorted((p for p in KFD_NODES.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    for node in nodes:
        try:
            props = (node / "properties").read_text()
            name = (node / "name").read_text().strip() if (node / "name").exists() else ""
        except OSError:
            continue
        is_gpu, uuid = parse_kfd_node(props)
        if is_gpu:
            slots.append(SlotInfo(id=str(len(slots)), device_type="rocm", brand=name, uuid=uuid))
    return slots


def _cpu_brand() -> str:
    try:
        return parse_cpu_model(Path("/proc/cpuinfo").read_text())
    except OSError:
        return ""


def select_slots(
    slot_type: DeviceType | None,
    count: int | None,
    probes: Mapping[DeviceType, Probe],
    cpu_brand: str = "",
) -> list[SlotInfo]:
    """The slots to offer, given the probes (pure apart from calling them).

    ``slot_type`` None tries cuda, then rocm, then falls back to CPU. A forced GPU type with
    no GPU found, or a ``count`` above the GPUs found, is a FailedPreconditionError.
    """
    if slot_type != "cpu":
        for kind in ("cuda", "rocm") if slot_type is None else (slot_type,):
            gpus = probes[kind]()
            if gpus:
                if count is not None and count > len(gpus):
                    raise FailedPreconditionError(
                        f"--slots {count}: only {len(gpus)} {kind} GPU(s) found"
                    )
                return gpus[:count] if count is not None else gpus
        if slot_type is not None:
            raise FailedPreconditionError(f"--slot-type {slot_type}: no {slot_type} GPU found")
    return [
        SlotInfo(id=str(index), device_type="cpu", brand=cpu_brand)
        for index in range(count if count is not None else 1)
    ]


def detect_slots(slot_type: DeviceType | None = None, count: int | None = None) -> list[SlotInfo]:
    """The host's slots (see :func:`select_slots`), probing the real devices."""
    probes: dict[DeviceType, Probe] = {"cuda": probe_nvidia, "rocm": probe_rocm}
    return select_slots(slot_type, count, probes, cpu_brand=_cpu_brand())
