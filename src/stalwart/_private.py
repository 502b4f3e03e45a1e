"""Private state directories: the master's home and each agent's home are 0700.

Tasks that an agent runs as an unprivileged user must not read the cluster's secrets (the
agent token, the master database); both daemons keep them in a directory only they can enter
and run with umask 0077 so that what they create there is 0600.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["private_directory"]


def private_directory(path: Path) -> None:
    """Create ``path`` 0700, or close an existing one owned by this process's user to 0700.

    A sticky directory (such as ``/tmp``, given by mistake as a home) and a directory owned by
    someone else are never changed. Raises OSError when ``path`` cannot be created.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = path.stat()
    mode = found.st_mode
    if found.st_uid == os.geteuid() and not mode & stat.S_ISVTX and stat.S_IMODE(mode) & 0o077:
        path.chmod(0o700)
