"""Nodes of their own for tests: network namespaces joined to this host by veth pairs.

An agent started in a :class:`Node` (``ip netns exec NAME ...``, :attr:`Node.exec_prefix`) has
its own address, as a separate machine would: the master reaches what it runs at
:attr:`Node.address`, never at loopback, and it reaches the master at :attr:`Node.host_address`.
Test traffic goes only to loopback and to these namespaces.

Needs root and ``ip`` (iproute2). :func:`require_netns` skips a test without them, and fails it
under ``CI=true`` (every service must be there in CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

__all__ = ["Node", "network_node", "require_netns"]


@dataclass(frozen=True)
class Node:
    """A network namespace and the two ends of its link to this host."""

    name: str
    host_address: str
    address: str

    @property
    def exec_prefix(self) -> tuple[str, ...]:
        """The command prefix that runs a program on this node."""
        return ("ip", "netns", "exec", self.name)


def require_netns() -> None:
    """Skip (fail under ``CI=true``) unless this process can create network namespaces."""
    problem = None
    if os.geteuid() != 0:
        problem = "network namespaces need root"
    elif shutil.which("ip") is None:
        problem = "the `ip` command (Debian's iproute2) is not installed"
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem}: CI runs these tests as root with iproute2")
    pytest.skip(problem)


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _kill_everything_in(name: str) -> None:
    done = subprocess.run(
        ["ip", "netns", "pids", name], capture_output=True, text=True, check=False
    )
    for pid in done.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def network_node(index: int) -> Iterator[Node]:
    """A namespace with the /30 ``10.<p>.<index>.0`` (``<p>`` from this process id, so that
    parallel test workers do not meet); removed afterwards with whatever still runs in it."""
    require_netns()
    tag = f"{os.getpid() % 100000}x{index}"
    name, host_end, node_end = f"stw{tag}", f"sh{tag}", f"sn{tag}"
    subnet = f"10.{100 + os.getpid() % 150}.{index}"
    node = Node(name=name, host_address=f"{subnet}.1", address=f"{subnet}.2")
    _ip("netns", "add", name)
    try:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
        _ip("link", "set", node_end, "netns", name)
        _ip("addr", "add", f"{node.host_address}/30", "dev", host_end)
        _ip("link", "set", host_end, "up")
        _ip("netns", "exec", name, "ip", "addr", "add", f"{node.address}/30", "dev", node_end)
        _ip("netns", "exec", name, "ip", "link", "set", node_end, "up")
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield node
    finally:
        _kill_everything_in(name)
        with contextlib.suppress(RuntimeError):
            _ip("link", "del", host_end)
        with contextlib.suppress(RuntimeError):
            _ip("netns", "del", name)
