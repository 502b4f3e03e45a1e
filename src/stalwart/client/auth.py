"""Where the client connects and as whom: the master URL, the user, and the token cache.

Contract:

- :func:`client_env` is the only place the SDK reads environment variables: the master
  (``STALWART_MASTER``, then ``DET_MASTER``), the user and password (Determined's ``DET_USER``
  and ``DET_PASS``) and the config directory (``$XDG_CONFIG_HOME/stalwart``, else
  ``~/.config/stalwart``). Other ``STALWART_*`` names are the master's settings (the master
  refuses unknown ones), so the client adds none.
- :func:`canonical_url` makes ``host``, ``host:port`` and ``http://host:port/`` the same key.
- :class:`TokenStore` keeps one token per master and user in ``auth.json`` (mode 0600 in a 0700
  directory, replaced atomically), with the active user of each master: the one ``stalwart user
  login`` chose last. Determined's v2 layout:
  ``{"version": 2, "masters": {url: {"active_user": u, "tokens": {u: token}}}}``.
- :func:`salt_and_hash` is Determined's client-side password hash (part of the wire protocol).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_MASTER",
    "DEFAULT_USER",
    "ClientEnv",
    "TokenStore",
    "canonical_url",
    "client_env",
    "salt_and_hash",
]

DEFAULT_MASTER = "http://localhost:8080"
DEFAULT_USER = "determined"
"""Who the client is when nobody logged in (Determined's built-in user, empty password)."""

_CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"


def salt_and_hash(password: str) -> str:
    """What goes on the wire for ``password`` with ``isHashed: true`` (``""`` stays ``""``)."""
    if password == "":
        return ""
    return hashlib.sha512((_CLIENT_SALT + password).encode()).hexdigest()


def canonical_url(url: str) -> str:
    """``http://`` added when there is no scheme, ``:8080`` when there is neither scheme nor
    port, and no trailing ``/``."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
        parts = urlsplit(url)
        if parts.port is None:
            url = f"{parts.scheme}://{parts.netloc}:8080{parts.path}"
    return url.rstrip("/")


@dataclass(frozen=True)
class ClientEnv:
    """What the environment says about the connection (see the module contract)."""

    master: str | None = None
    user: str | None = None
    password: str | None = None
    config_dir: Path | None = None
    token: str | None = None
    """``DET_USER_TOKEN``: a token (an access token) for ``DET_USER``, used when no token of
    that user is cached."""


def _first(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name)
        if value:
            return value
    return None


def client_env(environ: Mapping[str, str] | None = None) -> ClientEnv:
    """Read the client's environment variables once (``os.environ`` by default)."""
    env = os.environ if environ is None else environ
    xdg = _first(env, "XDG_CONFIG_HOME")
    user = _first(env, "DET_USER")
    return ClientEnv(
        master=_first(env, "STALWART_MASTER", "DET_MASTER"),
        user=user,
        password=env.get("DET_PASS") if user else None,
        token=env.get("DET_USER_TOKEN") or None if user else None,
        config_dir=Path(xdg).expanduser() / "stalwart" if xdg else None,
    )


class TokenStore:
    """Session tokens per master and user in one JSON file (see the module contract).

    Reads are forgiving: a missing or corrupt file is an empty store. Writes replace the whole
    file atomically. Not locked: two processes logging in at once may lose one token, which
    only costs a new login.
    """

    def __init__(self, path: Path | None = None, *, config_dir: Path | None = None) -> None:
        base = config_dir or Path("~/.config/stalwart").expanduser()
        self.path = path or base / "auth.json"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"version": 2, "masters": {}}
        if not isinstance(data, dict) or not isinstance(data.get("masters"), dict):
            return {"version": 2, "masters": {}}
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2, sort_keys=True)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise

    def _entry(self, data: dict[str, Any], master: str) -> dict[str, Any]:
        masters: dict[str, Any] = data["masters"]
        entry = masters.get(canonical_url(master))
        if not isinstance(entry, dict):
            entry = {"active_user": None, "tokens": {}}
            masters[canonical_url(master)] = entry
        if not isinstance(entry.get("tokens"), dict):
            entry["tokens"] = {}
        return entry

    def token(self, master: str, user: str) -> str | None:
        """The cached token of ``user`` on ``master``, if any."""
        token = self._entry(self._read(), master)["tokens"].get(user)
        return token if isinstance(token, str) and token else None

    def active_user(self, master: str) -> str | None:
        """The user ``stalwart user login`` chose last on ``master``, if any."""
        user = self._entry(self._read(), master).get("active_user")
        return user if isinstance(user, str) and user else None

    def put(self, master: str, user: str, token: str, *, activate: bool) -> None:
        """Cache ``token`` for ``user``; ``activate`` also makes ``user`` the active user."""
        data = self._read()
        entry = self._entry(data, master)
        entry["tokens"][user] = token
        if activate:
            entry["active_user"] = user
        self._write(data)

    def drop(self, master: str, user: str, *, forget_user: bool) -> None:
        """Forget ``user``'s token (``forget_user``: and that ``user`` is the active user)."""
        data = self._read()
        entry = self._entry(data, master)
        known = entry["tokens"].pop(user, None) is not None
        if forget_user and entry.get("active_user") == user:
            entry["active_user"] = None
            known = True
        if known:
            self._write(data)
