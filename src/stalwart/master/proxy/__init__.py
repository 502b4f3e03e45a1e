"""The forwarding half of the master's proxy to interactive tasks (``/proxy/{task_id}/...``).

The router (authentication, the permission check, finding the task's service) builds a
:class:`ProxyTarget` and calls one of:

- :func:`forward_http` for HTTP requests (returns a streaming response; raises
  :class:`~stalwart.errors.UnavailableError`, 503, when the service does not answer);
- :func:`forward_websocket` for WebSockets to HTTP services (``target.tcp`` false);
- :func:`tunnel_tcp` for WebSockets to raw TCP services (``target.tcp`` true, e.g. sshd).

The WebSocket functions take the client's WebSocket before it is accepted and answer
refusals themselves. Nothing here touches the database or checks credentials; the user's
master credentials (``Authorization``, the ``auth`` cookie) are never passed to a task. The
app's lifespan calls :func:`close_clients` on shutdown. ``docs/contributing/master.md``
("The proxy") has the whole picture.
"""

from stalwart.master.proxy.http import close_clients, forward_http, shared_client
from stalwart.master.proxy.target import CONNECT_TIMEOUT_S, ProxyTarget, request_path
from stalwart.master.proxy.tunnel import tunnel_tcp
from stalwart.master.proxy.websocket import forward_websocket

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ProxyTarget",
    "close_clients",
    "forward_http",
    "forward_websocket",
    "request_path",
    "shared_client",
    "tunnel_tcp",
]
