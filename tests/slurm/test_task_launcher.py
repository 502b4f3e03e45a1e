"""The batch-job launcher's pure parts (the whole launcher runs in ``test_master_slurm.py``)."""

from __future__ import annotations

import pytest

from stalwart.agent.protocol import TaskSpec
from stalwart.hpc.task import LaunchError, run_task, visible_slot_ids


def _spec(device: str, slots: list[str]) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "allocation_id": "1.a.1",
            "task_id": "1.a",
            "rank": 0,
            "container_id": "c",
            "slot_ids": slots,
            "device_type": device,
            "argv": ["true"],
            "token": "t",
        }
    )


def test_the_gpus_slurm_made_visible_become_the_slot_ids() -> None:
    assert visible_slot_ids(_spec("cuda", ["0", "1"]), {"CUDA_VISIBLE_DEVICES": "2,3"}) == [
        "2",
        "3",
    ]
    assert visible_slot_ids(_spec("rocm", ["0"]), {"ROCR_VISIBLE_DEVICES": "1"}) == ["1"]
    assert visible_slot_ids(_spec("cuda", ["0"]), {}) == ["0"]
    assert visible_slot_ids(_spec("cpu", []), {"CUDA_VISIBLE_DEVICES": "0"}) == []


def test_the_launcher_needs_its_inputs() -> None:
    with pytest.raises(LaunchError, match="STALWART_TOKEN_FILE"):
        run_task({"STALWART_MASTER_URL": "http://m:8080", "STALWART_ALLOCATION_ID": "a"})
