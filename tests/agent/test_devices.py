"""Slot detection: the parsers against captured tool output, and the choice of slots."""

from __future__ import annotations

import pytest

from stalwart.agent.devices import (
    Probe,
    detect_slots,
    parse_cpu_model,
    parse_kfd_node,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
    select_slots,
)
from stalwart.agent.protocol import DeviceType, SlotInfo
from stalwart.errors import FailedPreconditionError

# nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader (an 8-GPU H100 node, trimmed)
NVIDIA_SMI = """\
0, NVIDIA H100 80GB HBM3, GPU-5e0f6e1c-8d4a-3b3f-2f0e-1c2d3e4f5a6b
1, NVIDIA H100 80GB HBM3, GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90
"""

# rocm-smi --showuniqueid --showproductname --json (ROCm 6.x: a "system" entry as well)
ROCM_SMI = """\
{"card0": {"Unique ID": "0x18f68e602b8a790f", "Card Series": "AMD Instinct MI210",
"Card Model": "0x740f", "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
"Card SKU": "D67301", "Subsystem ID": "0x0c34", "Device Rev": "0x02", "Node ID": "2",
"GUID": "11554", "GFX Version": "gfx90a"},
"card1": {"Unique ID": "0x2a4c6e8f0b1d3f57", "Card Series": "AMD Instinct MI210",
"Card Model": "0x740f", "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
"Card SKU": "D67301", "Subsystem ID": "0x0c34", "Device Rev": "0x02", "Node ID": "3",
"GUID": "47001", "GFX Version": "gfx90a"},
"system": {"Driver version": "6.8.5"}}
"""

KFD_CPU_NODE = """\
cpu_cores_count 64
simd_count 0
mem_banks_count 1
gpu_id 0
vendor_id 0
unique_id 0
"""

KFD_GPU_NODE = """\
cpu_cores_count 0
simd_count 416
mem_banks_count 1
gpu_id 11554
vendor_id 4098
device_id 29711
unique_id 1798781644879591695
"""

CPUINFO = """\
processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7763 64-Core Processor
cpu MHz\t\t: 2445.404
"""


def test_nvidia_smi_csv() -> None:
    slots = parse_nvidia_smi_csv(NVIDIA_SMI + "\n")
    assert [s.id for s in slots] == ["0", "1"]
    assert slots[0] == SlotInfo(
        id="0",
        device_type="cuda",
        brand="NVIDIA H100 80GB HBM3",
        uuid="GPU-5e0f6e1c-8d4a-3b3f-2f0e-1c2d3e4f5a6b",
    )
    assert parse_nvidia_smi_csv("No devices were found\n") == []


def test_rocm_smi_json() -> None:
    slots = parse_rocm_smi_json(ROCM_SMI)
    assert [(s.id, s.device_type, s.brand, s.uuid) for s in slots] == [
        ("0", "rocm", "AMD Instinct MI210", "0x18f68e602b8a790f"),
        ("1", "rocm", "AMD Instinct MI210", "0x2a4c6e8f0b1d3f57"),
    ]
    assert parse_rocm_smi_json("{}") == []
    with pytest.raises(ValueError, match="Expecting value"):
        parse_rocm_smi_json("WARNING: No AMD GPUs specified")


def test_kfd_nodes() -> None:
    assert parse_kfd_node(KFD_CPU_NODE) == (False, "")
    assert parse_kfd_node(KFD_GPU_NODE) == (True, "0x18f68e602b8a790f")


def test_cpu_model() -> None:
    assert parse_cpu_model(CPUINFO) == "AMD EPYC 7763 64-Core Processor"
    assert parse_cpu_model("") == ""


GPUS = [SlotInfo(id=str(i), device_type="cuda", brand="G", uuid=f"GPU-{i}") for i in range(4)]
AMD = [SlotInfo(id="0", device_type="rocm", brand="MI210")]


def probes(cuda: list[SlotInfo], rocm: list[SlotInfo]) -> dict[DeviceType, Probe]:
    return {"cuda": lambda: cuda, "rocm": lambda: rocm}


def test_cpu_only_host_offers_one_cpu_slot_or_the_count_asked() -> None:
    none = probes([], [])
    assert select_slots(None, None, none, "EPYC") == [
        SlotInfo(id="0", device_type="cpu", brand="EPYC")
    ]
    assert [s.id for s in select_slots(None, 3, none)] == ["0", "1", "2"]


def test_gpus_are_preferred_nvidia_first_and_the_count_takes_the_first_ones() -> None:
    assert select_slots(None, None, probes(GPUS, AMD)) == GPUS
    assert select_slots(None, 2, probes(GPUS, [])) == GPUS[:2]
    assert select_slots(None, None, probes([], AMD)) == AMD
    assert select_slots("rocm", None, probes(GPUS, AMD)) == AMD


def test_forced_types() -> None:
    cpu = select_slots("cpu", 2, probes(GPUS, AMD))
    assert {s.device_type for s in cpu} == {"cpu"}
    assert len(cpu) == 2
    with pytest.raises(FailedPreconditionError, match="no cuda GPU found"):
        select_slots("cuda", None, probes([], AMD))
    with pytest.raises(FailedPreconditionError, match="only 4 cuda GPU"):
        select_slots(None, 5, probes(GPUS, []))


def test_detect_on_this_host() -> None:
    slots = detect_slots()
    assert slots
    assert len({s.device_type for s in slots}) == 1
    assert detect_slots("cpu", 2)[1].id == "1"
