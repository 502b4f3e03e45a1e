"""Who a local task runs as on its node, so that task code cannot read the cluster's secrets.

An agent running as root decides per task (:func:`identity_for`):

- a task whose owner is linked to an agent user (``det user link-with-agent-user``, carried in
  ``TaskSpec.run_as``) runs as that user and group;
- a task of an admin with no link runs as the agent's own user (root), as Determined runs it;
- every other task runs as the agent's ``task_user`` (default ``nobody``), resolved once at
  start by :func:`resolve_task_user`.

The task then gets no supplementary groups, its own files (:func:`hand_over`: its run
directory, working directory and a private ``HOME`` are chowned to it), and nothing else the
agent owns: the agent's and the master's homes are 0700, their files 0600. An agent that does not
run as root cannot switch users; it runs every task as itself and says so once at start.

Only the standard library and the protocol's models are imported here.
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from stalwart.agent.protocol import RunAs, TaskSpec

__all__ = [
    "IdentityError",
    "TaskIdentity",
    "allow_traversal",
    "can_run",
    "hand_over",
    "identity_for",
    "resolve_run_as",
    "resolve_task_user",
]

HOME_DIR = "home"
"""The task's private ``HOME``: ``<run dir>/home``, created by :func:`hand_over`."""


class IdentityError(Exception):
    """A user or group named for a task does not exist on this node (the message says which)."""


@dataclass(frozen=True)
class TaskIdentity:
    """A numeric user and group to run a task as; ``name`` is for messages and ``USER``."""

    uid: int
    gid: int
    name: str

    @property
    def arg(self) -> str:
        """``UID:GID``, as the wrappers' ``--as`` takes it."""
        return f"{self.uid}:{self.gid}"


def _user(name_or_id: str) -> pwd.struct_passwd | None:
    try:
        if name_or_id.isdigit():
            return pwd.getpwuid(int(name_or_id))
        return pwd.getpwnam(name_or_id)
    except KeyError:
        return None


def _group_id(name_or_id: str) -> int:
    if name_or_id.isdigit():
        return int(name_or_id)
    try:
        return grp.getgrnam(name_or_id).gr_gid
    except KeyError:
        raise IdentityError(f"no group {name_or_id!r} on this node") from None


def resolve_task_user(value: str) -> TaskIdentity:
    """The agent's ``task_user`` setting: ``USER`` or ``USER:GROUP``, names or numbers. A
    number with no passwd entry is used as is (its group: the same number)."""
    user_part, _, group_part = value.partition(":")
    entry = _user(user_part)
    if entry is None and not user_part.isdigit():
        raise IdentityError(
            f"no user {user_part!r} on this node: create it, or set the agent's task_user "
            "to an existing unprivileged user"
        )
    uid = entry.pw_uid if entry is not None else int(user_part)
    gid = entry.pw_gid if entry is not None else uid
    if group_part:
        gid = _group_id(group_part)
    return TaskIdentity(uid=uid, gid=gid, name=entry.pw_name if entry is not None else str(uid))


def resolve_run_as(run_as: RunAs) -> TaskIdentity:
    """A linked agent user on this node: numbers win over names; with no group, the user's
    primary group (or, for a uid without a passwd entry, the same number)."""
    entry = None
    if run_as.uid is not None:
        uid = run_as.uid
        entry = _user(str(uid))
    elif run_as.user:
        entry = _user(run_as.user)
        if entry is None:
            raise IdentityError(
                f"the task's owner is linked to agent user {run_as.user!r}, which this node "
                "does not have: create it, or link the owner to a uid"
            )
        uid = entry.pw_uid
    else:
        raise IdentityError("the task's owner is linked to an agent group but no agent user")
    if run_as.gid is not None:
        gid = run_as.gid
    elif run_as.group:
        gid = _group_id(run_as.group)
    else:
        gid = entry.pw_gid if entry is not None else uid
    return TaskIdentity(uid=uid, gid=gid, name=entry.pw_name if entry is not None else str(uid))


def identity_for(
    spec: TaskSpec, task_user: TaskIdentity | None, *, euid: int | None = None
) -> TaskIdentity | None:
    """Who runs ``spec`` (module docstring); None: the agent's own user. Always None for an
    agent that is not root (``euid``, default this process's), which cannot switch users.
    Raises IdentityError when the task's linked user cannot be found."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None
    if spec.run_as is not None:
        linked = resolve_run_as(spec.run_as)
        return linked if linked.uid != 0 else None
    if spec.privileged or task_user is None or task_user.uid == 0:
        return None
    return task_user


def hand_over(run_dir: Path, workdir: Path, identity: TaskIdentity) -> None:
    """Give the task its files: ``run_dir`` and ``workdir`` (whole trees, links not followed)
    and a new ``<run_dir>/home`` become ``identity``'s. Raises OSError."""
    home = run_dir / HOME_DIR
    home.mkdir(mode=0o700, exist_ok=True)
    for top in (run_dir, workdir):
        os.chown(top, identity.uid, identity.gid, follow_symlinks=False)
        for parent, dirs, files in os.walk(top):
            for name in (*dirs, *files):
                path = os.path.join(parent, name)
                os.chown(path, identity.uid, identity.gid, follow_symlinks=False)


def can_run(path: Path, identity: TaskIdentity) -> bool:
    """Whether ``identity`` may execute ``path`` (links resolved), judged from the mode bits of
    the file and of every directory above it (ACLs are not read)."""

    def allowed(mode: int, uid: int, gid: int, bit: int) -> bool:
        if uid == identity.uid:
            return bool(mode & (bit << 6))
        if gid == identity.gid:
            return bool(mode & (bit << 3))
        return bool(mode & bit)

    try:
        real = Path(os.path.realpath(path))
        found = real.stat()
        if not allowed(found.st_mode, found.st_uid, found.st_gid, 0o1):
            return False
        for directory in real.parents:
            info = directory.stat()
            if not allowed(info.st_mode, info.st_uid, info.st_gid, 0o1):
                return False
    except OSError:
        return False
    return True


def allow_traversal(home: Path, target: Path) -> None:
    """Let anyone pass through (not list) each directory from ``home`` down to ``target``'s
    parent: a task started without a namespace reaches its files by their host paths. The
    directories above ``home`` are the administrator's to open. Raises OSError."""
    path = target.parent
    chain = [path]
    while path != home and home in path.parents:
        path = path.parent
        chain.append(path)
    for directory in chain:
        mode = directory.stat().st_mode & 0o7777
        if mode & 0o011 != 0o011:
            directory.chmod(mode | 0o011)
