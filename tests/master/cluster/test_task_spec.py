"""The task contract's pure pieces: entrypoints and per-allocation ports."""

from __future__ import annotations

import pytest

from stalwart.agent.protocol import RunAs
from stalwart.master.db.tables import User
from stalwart.master.services.task_spec import (
    PORT_BASES,
    entrypoint_argv,
    free_port_offset,
    ports_for,
    run_as_of,
)


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
        assert len(ports) == len(PORT_BASES)
        assert not ports & seen
        seen |= ports
    assert ports_for(0)["C10D_PORT"] == 29400
    assert free_port_offset({0, 1, 3}) == 2


def test_a_task_says_who_owns_it() -> None:
    """The agent decides the task's OS user from its owner (docs/security.md)."""
    linked = User(
        username="bob", admin=False, agent_uid=4242, agent_gid=4243, agent_user="b", agent_group="g"
    )
    assert run_as_of(linked) == RunAs(uid=4242, gid=4243, user="b", group="g")
    assert run_as_of(User(username="alice", admin=False)) is None
    assert run_as_of(None) is None
