"""The token an agent presents: its own (``<home>/agent_token``), else the enrollment token.

Contract of :class:`AgentCredential` (used by the sync loop only, one thread):

- At start the agent presents its own token when ``<home>/agent_token`` holds one (a token the
  master issued to this agent id earlier), else the configured enrollment token (the cluster's
  agent token). With neither, :meth:`AgentCredential.load` raises UnauthenticatedError.
- :meth:`AgentCredential.adopt`: the master answered an enrolling sync with the agent's own
  token. It is written to ``<home>/agent_token`` first (mode 0600, atomically: a temporary file
  in the same directory, fsynced, renamed over the old one), then presented from the next sync
  on. A token that cannot be stored raises FailedPreconditionError: the master has not seen it
  used, so the same agent id enrolls again once the home is writable.
- :meth:`AgentCredential.refused`: the master refused the token (401). Presenting its own token,
  with an enrollment token configured, the agent falls back to the enrollment token (logged)
  and the caller syncs again: once, since a refusal of the enrollment token is final (False).
  The stored file is left as it is until a new token replaces it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

from stalwart.errors import FailedPreconditionError, UnauthenticatedError

__all__ = ["TOKEN_FILE", "AgentCredential", "write_private"]

log = logging.getLogger(__name__)

TOKEN_FILE = "agent_token"
"""The agent's own token, under its home."""


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, readable by its owner only (0600).

    Readers see the old content or the new, never a part; after a crash, at worst a stray
    ``.agent_token-*`` temporary file is left next to it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a power cut
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class AgentCredential:
    """Which token the agent presents, and what it does when the master answers about it."""

    def __init__(self, home: Path, enrollment: str, own: str | None) -> None:
        self.path = home / TOKEN_FILE
        self._enrollment = enrollment
        self._own = own

    @classmethod
    def load(cls, home: Path, enrollment: str) -> AgentCredential:
        """The agent's own token from ``<home>/agent_token`` when it holds one, with the
        enrollment token to fall back on (empty: none)."""
        path = home / TOKEN_FILE
        try:
            own = path.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            own = None
        except OSError as exc:
            raise FailedPreconditionError(f"cannot read the agent's token {path}: {exc}") from exc
        if own is None and not enrollment:
            raise UnauthenticatedError(
                f"no agent token: {path} does not exist and no enrollment token was given",
                hint="give the master's agent token (<master home>/agent_token) with --token, "
                "STALWART_AGENT_TOKEN or --token-file",
            )
        return cls(home, enrollment, own)

    @property
    def token(self) -> str:
        """The token to present now."""
        return self._own if self._own is not None else self._enrollment

    @property
    def enrolled(self) -> bool:
        """Whether the agent presents its own token (rather than the enrollment token)."""
        return self._own is not None

    def adopt(self, token: str) -> None:
        """Store the token the master issued, then present it (see the module docstring)."""
        try:
            write_private(self.path, token + "\n")
        except OSError as exc:
            raise FailedPreconditionError(
                f"the master enrolled this agent but its token cannot be stored in {self.path}: "
                f"{exc}",
                hint="make the agent's --home writable and start it again (it enrolls again)",
            ) from exc
        self._own = token
        log.info("enrolled with the master; the agent's own token is in %s", self.path)

    def refused(self) -> bool:
        """After a 401: whether to sync again with the enrollment token (see the module
        docstring)."""
        if self._own is None or not self._enrollment:
            return False
        log.warning(
            "the master refused this agent's own token (%s); enrolling again with the "
            "enrollment token",
            self.path,
        )
        self._own = None
        return True
