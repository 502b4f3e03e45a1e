"""How the master's settings become uvicorn's options (``stalwart master``, ``stalwart up``).

- Proxy headers: uvicorn believes ``X-Forwarded-For`` / ``X-Forwarded-Proto`` from loopback by
  default, which would let any local client (or a proxy passing the header through) pick the
  address the login lockout counts. They are believed only from ``http.trusted_proxies``, and
  not at all when it is empty (the default).
- TLS: ``http.tls_cert`` and ``http.tls_key`` make uvicorn serve HTTPS.
"""

from __future__ import annotations

from typing import Any

from stalwart.master.settings import MasterSettings

__all__ = ["master_url", "uvicorn_options"]


def uvicorn_options(settings: MasterSettings) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config`` (besides the app)."""
    http = settings.http
    options: dict[str, Any] = {
        "proxy_headers": bool(http.trusted_proxies),
        "forwarded_allow_ips": ",".join(http.trusted_proxies) or "",
    }
    if http.tls_cert is not None and http.tls_key is not None:
        options["ssl_certfile"] = str(http.tls_cert)
        options["ssl_keyfile"] = str(http.tls_key)
    return options


def master_url(settings: MasterSettings) -> str:
    """The URL the master serves at (``https://`` with TLS)."""
    scheme = "https" if settings.http.tls_cert is not None else "http"
    return f"{scheme}://{settings.host}:{settings.port}"
