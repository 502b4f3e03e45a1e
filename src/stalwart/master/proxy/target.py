"""Where a proxied request goes: :class:`ProxyTarget`, and the upstream URL built from it.

The router finds a task's service (its node's address and port, and whether it speaks HTTP or
raw TCP) and hands a :class:`ProxyTarget` to the forwarding functions; nothing here reads the
database or checks permissions.

``path`` is the upstream request path, sent as given (percent-escapes kept; characters a URL
cannot hold are escaped). Stalwart starts JupyterLab with ``base_url`` ``/proxy/{task_id}/``
(and TensorBoard with the same path prefix), so the router passes the path the user asked for
unchanged: :func:`request_path` gives it exactly as the client sent it, ``%2F`` and all (the
decoded ``{path:path}`` parameter would turn an escaped slash into a real one).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from starlette.requests import HTTPConnection

from stalwart.errors import UnavailableError

__all__ = ["CONNECT_TIMEOUT_S", "ProxyTarget", "not_answering", "request_path"]

CONNECT_TIMEOUT_S = 10.0
"""How long opening a connection to a task's service may take (HTTP, WebSocket and TCP alike).
Nothing else has a time limit: a long-poll, an event stream or an idle shell may stay quiet
for hours."""

_PATH_SAFE = "/%:@!$&'()*+,;=~"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True)
class ProxyTarget:
    """A task's service: ``host`` and ``port`` on its node; ``tcp`` when it speaks raw TCP
    (sshd), reached through a WebSocket tunnel (:func:`~stalwart.master.proxy.tunnel_tcp`)
    rather than by forwarding HTTP and WebSocket requests."""

    host: str
    port: int
    tcp: bool = False

    @property
    def netloc(self) -> str:
        """``host:port``, with brackets around an IPv6 address; also the upstream ``Host``."""
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"

    def url(self, scheme: str, path: str, query: bytes | str = b"") -> str:
        """``scheme://host:port/path?query`` for the upstream request (see the module
        docstring for ``path``); the query is the raw query string, without ``?``."""
        if isinstance(query, bytes):
            query = query.decode("latin-1")
        escaped = quote(path if path.startswith("/") else "/" + path, safe=_PATH_SAFE)
        url = f"{scheme}://{self.netloc}{escaped}"
        return f"{url}?{quote(query, safe=_QUERY_SAFE)}" if query else url


def request_path(connection: HTTPConnection) -> str:
    """The path of a request or WebSocket as the client sent it (percent-escaped, no query)."""
    raw = connection.scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return raw.decode("latin-1").split("?", 1)[0]
    return quote(str(connection.scope.get("path", "/")), safe=_PATH_SAFE)


def not_answering(target: ProxyTarget) -> UnavailableError:
    """The error for a service that cannot be reached (refused, unroutable, timed out)."""
    return UnavailableError(
        f"the task's service at {target.netloc} does not answer: it may still be starting; "
        "try again in a moment"
    )
