"""The master's home directory: private to the master, with one shared corner for checkpoints.

:func:`prepare_home` runs once at start (:func:`stalwart.master.app.open_state`):

- the home is created 0700 (an existing one owned by the master is closed to 0700, unless it is
  a sticky shared directory such as ``/tmp``, which is never changed);
- the files the master keeps there (``master.db``, ``agent_token``) are made 0600; new files
  are created 0600 anyway, as ``stalwart master`` runs with umask 0077;
- the default checkpoint storage, ``<home>/checkpoints``, is created 1777 (world-writable and
  sticky, as ``/tmp``): tasks that an agent runs as an unprivileged user write their checkpoints
  there through their mount namespace's ``/determined_shared_fs``, while the rest of the home
  stays closed to them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from stalwart._private import private_directory

__all__ = ["PRIVATE_FILES", "prepare_home", "shared_checkpoint_dir"]

PRIVATE_FILES = ("master.db", "master.db-wal", "master.db-shm", "agent_token")


def prepare_home(home: Path, *, default_checkpoints: Path | None) -> None:
    """Make ``home`` private (module docstring); ``default_checkpoints``, when the master uses
    its default storage, is created shared. Raises OSError when the home cannot be created."""
    private_directory(home)
    for name in PRIVATE_FILES:
        path = home / name
        with contextlib.suppress(FileNotFoundError):
            found = path.stat()
            if found.st_uid == os.geteuid() and stat.S_IMODE(found.st_mode) & 0o077:
                path.chmod(0o600)
    if default_checkpoints is not None:
        shared_checkpoint_dir(default_checkpoints)


def shared_checkpoint_dir(path: Path) -> None:
    """Create ``path`` world-writable and sticky (1777) when it is missing; an existing
    directory is left as its owner made it."""
    if path.exists():
        return
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o1777)
