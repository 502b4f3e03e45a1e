"""The task contract's pure pieces: entrypoints and per-allocation ports."""

from __future__ import annotations

import pytest

from stalwart.master.services.task_spec import entrypoint_argv, free_port_offset, ports_for


def test_entrypoints() -> None:
    assert entrypoint_argv("python3 train.py") == ["sh", "-c", "python3 train.py"]
    assert entrypoint_argv(["python3", "train.py"]) == ["python3", "train.py"]
    assert entrypoint_argv("model_def:MyTrial")[1:4] == [
        "-m",
        "determined.launch.torch_distributed",
        "--trial",
    ]
    with pytest.raises(ValueError, match="no entrypoint"):
        entrypoint_argv(None)


def test_ports_never_collide() -> None:
    seen: set[int] = set()
    used: set[int] = set()
    for _ in range(40):
        offset = free_port_offset(used)
        used.add(offset)
        ports = set(ports_for(offset).values())
        assert len(ports) == 4
        assert not ports & seen
        seen |= ports
    assert ports_for(0)["C10D_PORT"] == 29400
    assert free_port_offset({0, 1, 3}) == 2
