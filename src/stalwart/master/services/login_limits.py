"""Login rate limiting: failed logins counted per (username, client address), in the database.

After ``max_failures`` failed logins of one username from one address within ``window``
seconds, further attempts from that address for that username are refused (429, with the
seconds to wait) until ``window`` seconds have passed since the failure that reached the limit.
A successful login clears the count. Other addresses and other usernames are not affected, so
one client cannot lock a user out everywhere. Usernames are compared without case.

The failures are rows of ``login_failures`` (one per failed login), so the counts hold across
master restarts and are shared by every master on the same database. Each call runs in a short
transaction of its own (not the request's, which a failed login rolls back). Rows older than
``window`` no longer count: a failure deletes its own key's, and at most once per ``window``
a master deletes everyone's (best effort: a failed sweep is tried again later). The table stays
as small as the failures of the last ``window`` seconds.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from stalwart.errors import TooManyRequestsError
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import LoginFailure

__all__ = ["LoginLimiter"]

log = logging.getLogger(__name__)

_WIDTH = 255  # the width of login_failures.username and .address


def _key(username: str, address: str) -> tuple[str, str]:
    return username.lower()[:_WIDTH], address[:_WIDTH]


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


class LoginLimiter:
    """Counts failed logins in the database; safe to share between threads and processes.

    ``clock`` gives wall-clock seconds (the rows are compared between processes).
    """

    def __init__(
        self,
        sessions: SessionFactory,
        max_failures: int,
        window: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.max_failures = max_failures
        self.window = window
        self._clock = clock
        self._last_sweep = -math.inf
        self._sweep_lock = threading.Lock()

    def check(self, username: str, address: str) -> None:
        """TooManyRequestsError when ``username`` from ``address`` is locked out now."""
        name, addr = _key(username, address)
        now = self._clock()
        with self.sessions() as session:
            recent = session.scalars(
                select(LoginFailure.failed_at)
                .where(
                    LoginFailure.username == name,
                    LoginFailure.address == addr,
                    LoginFailure.failed_at > _at(now - self.window),
                )
                .order_by(LoginFailure.failed_at.desc())
                .limit(self.max_failures)
            ).all()
        if len(recent) < self.max_failures:
            return
        wait = math.ceil(recent[-1].timestamp() + self.window - now)
        raise TooManyRequestsError(
            f"too many failed logins for user '{username}' from this address: try again in "
            f"{max(1, wait)} seconds",
            retry_after=wait,
        )

    def failed(self, username: str, address: str) -> None:
        """Record a failed login (and forget this key's failures that left the window)."""
        name, addr = _key(username, address)
        now = self._clock()
        with self.sessions() as session:
            session.execute(
                delete(LoginFailure).where(
                    LoginFailure.username == name,
                    LoginFailure.address == addr,
                    LoginFailure.failed_at <= _at(now - self.window),
                )
            )
            session.add(LoginFailure(username=name, address=addr, failed_at=_at(now)))
            session.commit()
        self._sweep(now)

    def succeeded(self, username: str, address: str) -> None:
        """Forget the failures of ``username`` from ``address``."""
        name, addr = _key(username, address)
        with self.sessions() as session:
            session.execute(
                delete(LoginFailure).where(
                    LoginFailure.username == name, LoginFailure.address == addr
                )
            )
            session.commit()

    def _sweep(self, now: float) -> None:
        """Delete every failure that left the window, at most once per window."""
        with self._sweep_lock:
            if now - self._last_sweep < self.window:
                return
            self._last_sweep = now
        try:
            with self.sessions() as session:
                session.execute(
                    delete(LoginFailure).where(LoginFailure.failed_at <= _at(now - self.window))
                )
                session.commit()
        except SQLAlchemyError as exc:  # another master sweeping, a busy database: next time
            log.debug("sweeping expired login failures failed: %s", exc)
