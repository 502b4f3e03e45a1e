"""Who a local task runs as (:mod:`stalwart.agent.identity`), and what a task run as another
user gets: its own files, a private HOME, no supplementary groups, and nothing of the agent's.

The runner tests start real processes as ``nobody``; they need a root agent (the suite runs as
root in CI) and skip otherwise, saying so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart._private import private_directory
from stalwart.agent.identity import (
    HOME_DIR,
    IdentityError,
    TaskIdentity,
    can_run,
    hand_over,
    identity_for,
    resolve_run_as,
    resolve_task_user,
)
from stalwart.agent.isolation import SHARED_FS_TARGET, config_seen_inside, probe
from stalwart.agent.logs import MASK, SecretMask
from stalwart.agent.protocol import RunAs, TaskSpec
from stalwart.agent.runner import UNRUNNABLE_PYTHON, ProcessRunner
from stalwart.agent.workspace import Workspace
from stalwart.master.home import prepare_home
from tests.agent.test_runner import Sink, finish

NOBODY = TaskIdentity(uid=65534, gid=65534, name="nobody")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def _spec(argv: list[str], **extra: object) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "allocation_id": "1.abc.1",
            "task_id": "1.abc",
            "rank": 0,
            "container_id": "c0",
            "argv": argv,
            "token": "t",
            **extra,
        }
    )


# --- deciding who runs a task --------------------------------------------------------------------


def test_task_user_setting_resolves_names_and_numbers() -> None:
    assert resolve_task_user("nobody").uid == 65534
    assert resolve_task_user("65534") == resolve_task_user("nobody")
    assert resolve_task_user("nobody:0").gid == 0
    assert resolve_task_user("4321") == TaskIdentity(4321, 4321, "4321")  # no passwd entry
    with pytest.raises(IdentityError, match="no user 'nosuchuser' on this node"):
        resolve_task_user("nosuchuser")
    with pytest.raises(IdentityError, match="no group 'nosuchgroup'"):
        resolve_task_user("nobody:nosuchgroup")


def test_a_linked_agent_user_is_resolved_numbers_first() -> None:
    assert resolve_run_as(RunAs(uid=4242, gid=4243, user="bob", group="bob")) == TaskIdentity(
        4242, 4243, "4242"
    )
    assert resolve_run_as(RunAs(user="nobody")) == NOBODY
    with pytest.raises(IdentityError, match="agent user 'bob', which this node does not have"):
        resolve_run_as(RunAs(user="bob"))


def test_who_runs_a_task() -> None:
    plain, admin = _spec(["true"]), _spec(["true"], privileged=True)
    linked = _spec(["true"], run_as={"uid": 4242, "gid": 4242}, privileged=True)
    assert identity_for(plain, NOBODY, euid=0) == NOBODY
    assert identity_for(admin, NOBODY, euid=0) is None  # an admin's task: the agent's user
    assert identity_for(linked, NOBODY, euid=0) == TaskIdentity(4242, 4242, "4242")
    assert identity_for(_spec(["true"], run_as={"uid": 0}), NOBODY, euid=0) is None
    for spec in (plain, admin, linked):  # an agent that is not root cannot switch
        assert identity_for(spec, NOBODY, euid=1000) is None


# --- files ---------------------------------------------------------------------------------------


@root_only
def test_hand_over_gives_the_task_its_files_and_a_home(tmp_path: Path) -> None:
    run, work = tmp_path / "run", tmp_path / "workdir"
    (run / "info").mkdir(parents=True)
    (run / "info" / "cluster.json").write_text("{}")
    work.mkdir()
    (work / "train.py").write_text("")
    (work / "link").symlink_to("/etc/passwd")
    hand_over(run, work, NOBODY)
    for path in (run, run / "info" / "cluster.json", run / HOME_DIR, work, work / "train.py"):
        assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534), path
    assert Path("/etc/passwd").stat().st_uid == 0  # links are not followed
    assert stat.S_IMODE((run / HOME_DIR).stat().st_mode) == 0o700


def test_can_run_reads_every_directory_above(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    (closed / "bin").mkdir(parents=True)
    tool = closed / "bin" / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    closed.chmod(0o700)
    os.chmod(tmp_path, 0o755)
    owner = TaskIdentity(os.geteuid(), os.getegid(), "me")
    assert can_run(tool, owner)
    assert not can_run(tool, TaskIdentity(65534, 65534, "nobody"))
    closed.chmod(0o711)
    assert can_run(tool, TaskIdentity(65534, 65534, "nobody")) == all(
        p.stat().st_mode & 0o001 for p in tmp_path.parents
    )
    assert not can_run(tmp_path / "missing", owner)


def test_private_directories_close_but_never_a_shared_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    private_directory(home)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    private_directory(shared)  # a home given as /tmp by mistake is left alone
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    private_directory(tmp_path / "new" / "one")
    assert stat.S_IMODE((tmp_path / "new" / "one").stat().st_mode) == 0o700


def test_the_master_home_is_private_with_a_shared_checkpoint_corner(tmp_path: Path) -> None:
    home = tmp_path / "master"
    home.mkdir()
    home.chmod(0o755)
    (home / "master.db").write_text("")
    (home / "master.db").chmod(0o644)
    prepare_home(home, default_checkpoints=home / "checkpoints")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "master.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "checkpoints").stat().st_mode) == 0o1777
    (home / "checkpoints").chmod(0o750)  # an operator's choice stays
    prepare_home(home, default_checkpoints=home / "checkpoints")
    assert stat.S_IMODE((home / "checkpoints").stat().st_mode) == 0o750


def test_a_task_in_a_namespace_sees_its_storage_at_the_fixed_path() -> None:
    config = {
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": "/data",
            "storage_path": "/data/c",
        },
        "name": "x",
    }
    inside = json.loads(config_seen_inside(json.dumps(config)))
    assert inside["checkpoint_storage"] == {
        "type": "shared_fs",
        "host_path": SHARED_FS_TARGET,
        "storage_path": "c",
    }
    assert inside["name"] == "x"
    s3 = json.dumps({"checkpoint_storage": {"type": "s3", "bucket": "b"}})
    assert config_seen_inside(s3) == s3
    assert config_seen_inside("not json") == "not json"


def test_the_agent_masks_its_token_in_task_lines() -> None:
    mask = SecretMask("enrollment-token-123", "short")
    assert mask("token: enrollment-token-123!") == f"token: {MASK}!"
    assert mask("short stays") == "short stays"  # too short to mask safely
    mask.add("per-agent-token-456")
    assert mask("per-agent-token-456") == MASK


# --- real tasks run as nobody --------------------------------------------------------------------


@pytest.fixture
def open_home() -> Iterator[Path]:
    """An agent home under /tmp itself (pytest's own temporary root is closed to others)."""
    home = Path(tempfile.mkdtemp(prefix="stalwart-agent-", dir="/tmp"))
    try:
        yield home
    finally:
        for parent, dirs, _files in os.walk(home):
            for name in dirs:
                os.chmod(os.path.join(parent, name), 0o700)
        shutil.rmtree(home, ignore_errors=True)


def _workspace(home: Path) -> Workspace:
    root = home / "tasks" / "1.abc.1" / "rank-0"
    (root / "run").mkdir(parents=True)
    (root / "workdir").mkdir()
    for directory in (home, home / "tasks", root.parent, root):
        directory.chmod(0o700)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root"}
    return Workspace(root, root / "run", root / "workdir", Path("/usr/bin/python3"), env)


SCRIPT = 'echo "$(id -u) $(id -G) $HOME $(pwd)"; cat "$SECRET" 2>&1 || true; touch mine'


@root_only
def test_a_task_without_namespaces_runs_as_the_task_user(open_home: Path) -> None:
    secret = open_home / "agent_token"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    ws = _workspace(open_home)
    runner, sink = ProcessRunner(no_namespace_reason="off", task_user=NOBODY), Sink()
    env = {"SECRET": str(secret)}
    handle = runner.start(
        _spec(["sh", "-c", SCRIPT], env=env),
        ws.__class__(ws.root, ws.run_dir, ws.workdir, ws.python, {**ws.env, **env}),
        sink,
    )
    assert finish(runner, handle) == 0, sink.lines
    first, second = sink.text()
    assert first == f"65534 65534 {ws.run_dir / HOME_DIR} {ws.workdir}\n"
    assert "Permission denied" in second
    assert (ws.workdir / "mine").stat().st_uid == 65534
    assert stat.S_IMODE((ws.workdir / "mine").stat().st_mode) == 0o644  # umask 0022


@root_only
def test_a_task_in_a_namespace_runs_as_the_task_user(open_home: Path) -> None:
    spaces = probe(open_home / "tmp")
    if isinstance(spaces, str):
        pytest.skip(f"no mount namespaces here: {spaces}")
    ws = _workspace(open_home)
    runner, sink = ProcessRunner(spaces, task_user=NOBODY), Sink()
    handle = runner.start(
        _spec(["sh", "-c", 'echo "$(id -u) $HOME $(pwd) $DET_RUN_DIR"']), ws, sink
    )
    assert finish(runner, handle) == 0, sink.lines
    assert sink.text() == ["65534 /run/determined/home /run/determined/workdir /run/determined\n"]
    # the agent's home stayed closed: the task reached its files only through the namespace
    assert stat.S_IMODE(open_home.stat().st_mode) == 0o700


@root_only
def test_a_task_user_who_cannot_run_the_agents_python_is_told_so(open_home: Path) -> None:
    ws = _workspace(open_home)
    closed = dataclasses.replace(ws, python=open_home / "tasks" / "python3")
    runner, sink = ProcessRunner(no_namespace_reason="off", task_user=NOBODY), Sink()
    handle = runner.start(_spec(["true"]), closed, sink)
    assert finish(runner, handle) == 0
    note = UNRUNNABLE_PYTHON.format(python=closed.python, who=NOBODY)
    assert sink.text("stderr") == [note]
