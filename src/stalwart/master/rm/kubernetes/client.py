"""A small Kubernetes API client on the official ``kubernetes`` library: the calls the resource
manager uses.

:class:`KubeApi` is the interface (its implementations: :class:`KubernetesClientApi` against a
real API server or the shipped fake, ``tests/k8s/fake_api.py``). Objects are plain JSON mappings.
Contracts:

- :meth:`~KubeApi.create` raises :class:`AlreadyExistsError` (409) when the name is taken:
  callers treat it as "already done" (creation is retried after a master restart).
- :meth:`~KubeApi.delete` is idempotent: a missing object is not an error.
- :meth:`~KubeApi.get` returns None for a missing object.
- :meth:`~KubeApi.watch` yields :class:`WatchEvent`\\ s from ``resource_version`` (bookmarks
  included, type ``BOOKMARK``) until the server ends the stream; it raises :class:`GoneError`
  when that version is too old (HTTP 410, or an ``ERROR`` event with code 410): list again.
- Every failure is a :class:`KubeError` with the API's status code and message;
  :attr:`KubeError.retryable` says whether trying again later may help (429, 5xx, transport).

:func:`load_config` finds the cluster: a kubeconfig file (``kubeconfig`` setting, else
``$KUBECONFIG``, else ``~/.kube/config``) read by the library's kubeconfig loader (tokens, token
files, client certificates, and ``exec`` credential plugins such as ``aws eks get-token``,
``gke-gcloud-auth-plugin`` or ``kubelogin``: a plugin's token is fetched again before its
``expirationTimestamp``), or the pod's service account when the master runs in the cluster,
through the library's in-cluster loader (it reads the token file again every minute, so a
rotated projected token is picked up).

Requests go through the library's ``ApiClient`` (authentication, TLS, proxies, token refresh,
connection pool; thread-safe) without its generated models: bodies are sent and answers decoded
as plain JSON here, and watches are read line by line from the open response.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import yaml

try:
    import urllib3
    from kubernetes.client import ApiClient, Configuration
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import (
        SERVICE_HOST_ENV_NAME,
        SERVICE_PORT_ENV_NAME,
        InClusterConfigLoader,
    )
    from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger
except ImportError as exc:  # the k8s extra is not installed
    raise ModuleNotFoundError(
        "the Kubernetes resource manager needs its extra: pip install 'stalwart[master,k8s]' "
        f"({exc.name} missing)",
        name=exc.name,
    ) from exc

__all__ = [
    "KINDS",
    "SERVICE_ACCOUNT_DIR",
    "AlreadyExistsError",
    "GoneError",
    "Kind",
    "KubeApi",
    "KubeConfig",
    "KubeError",
    "KubernetesClientApi",
    "WatchEvent",
    "load_config",
]

Kind = Literal["jobs", "pods", "configmaps", "secrets", "services", "daemonsets", "events"]
KINDS: Mapping[str, str] = {
    "jobs": "/apis/batch/v1",
    "pods": "/api/v1",
    "configmaps": "/api/v1",
    "secrets": "/api/v1",
    "services": "/api/v1",
    "daemonsets": "/apis/apps/v1",
    "events": "/api/v1",
}
"""Each kind's API group path."""

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod's service account (``token``, ``ca.crt``, ``namespace``) is mounted."""


class KubeError(Exception):
    """A Kubernetes API call failed (``code``: the HTTP status, 0 for a transport error)."""

    def __init__(self, message: str, code: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later (throttled, server or network trouble)."""
        return self.code == 0 or self.code == 429 or self.code >= 500


class AlreadyExistsError(KubeError):
    """Create of a name that exists (409)."""


class GoneError(KubeError):
    """The resource version is too old to watch from (410): list again."""


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion") or "")


class KubeApi(ABC):
    """The Kubernetes calls Stalwart makes (see the module docstring for the contracts)."""

    @abstractmethod
    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create an object; the created object."""

    @abstractmethod
    def replace(
        self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Replace (PUT) an existing object; the stored object."""

    @abstractmethod
    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        """Delete an object and its dependents (background propagation); idempotent."""

    @abstractmethod
    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        """One object, or None."""

    @abstractmethod
    def list(
        self, kind: Kind, namespace: str, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects matching ``label_selector`` and the list's resource version."""

    @abstractmethod
    def watch(
        self,
        kind: Kind,
        namespace: str,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Generator[WatchEvent, None, None]:
        """Changes after ``resource_version`` (see the module docstring); may block."""

    def close(self) -> None:  # noqa: B027 (optional)
        """Release connections."""


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeConfig:
    """Where the API server is and how to authenticate: the library's ``Configuration``, filled
    (and kept fresh, through its ``refresh_api_key_hook``) by the library's loader."""

    configuration: Configuration
    namespace: str | None = None
    """The kubeconfig context's namespace, or the service account's."""
    source: str = ""
    """Where it came from (for messages): the kubeconfig path(s) or the service account."""
    loader: Any = None
    """The library's loader (``KubeConfigLoader`` or ``InClusterConfigLoader``) that refreshes
    the token: an exec plugin's token before its expiry, the service account's every minute."""

    @property
    def server(self) -> str:
        return str(self.configuration.host)

    @property
    def token(self) -> str | None:
        """The bearer token the next request sends (None without one)."""
        value = self.configuration.api_key.get("BearerToken")
        scheme, _, token = str(value or "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    @property
    def ca_file(self) -> str | None:
        return self.configuration.ssl_ca_cert


def _from_kubeconfig(paths: str) -> KubeConfig:
    """The current context of the kubeconfig file(s) ``paths`` (``os.pathsep``-separated, merged
    as kubectl does)."""
    configuration = Configuration()
    try:
        merged = KubeConfigMerger(paths)  # type: ignore[no-untyped-call]
        if merged.config is None:
            raise ConfigException("no configuration found")
        loader = KubeConfigLoader(config_dict=merged.config, config_base_path=None)  # type: ignore[no-untyped-call]
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        context = loader.current_context.get("context") or {}
    except (ConfigException, OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise KubeError(
            f"cannot use the kubeconfig {paths}: {exc} (run `kubectl config use-context NAME`, "
            "or set resource_manager.kubeconfig to another file)"
        ) from exc
    namespace = context.get("namespace")
    return KubeConfig(configuration, str(namespace) if namespace else None, paths, loader)


def _in_cluster(host: str, port: str, directory: Path) -> KubeConfig:
    """The pod's service account in ``directory`` (``token``, ``ca.crt``, ``namespace``)."""
    configuration = Configuration()
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(directory / "token"),
        cert_filename=str(directory / "ca.crt"),
        environ={SERVICE_HOST_ENV_NAME: host, SERVICE_PORT_ENV_NAME: port},
    )
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        namespace_file = directory / "namespace"
        namespace = (
            namespace_file.read_text(encoding="utf-8").strip() if namespace_file.is_file() else ""
        )
    except (ConfigException, OSError) as exc:
        raise KubeError(f"cannot use the pod's service account in {directory}: {exc}") from exc
    return KubeConfig(configuration, namespace or None, f"service account {directory}", loader)


def load_config(
    kubeconfig: Path | None,
    environ: Mapping[str, str],
    *,
    service_account: Path = SERVICE_ACCOUNT_DIR,
) -> KubeConfig:
    """The cluster to talk to: ``kubeconfig``; else in-cluster (a service account token in
    ``service_account`` and ``KUBERNETES_SERVICE_HOST``); else ``$KUBECONFIG`` (its files merged)
    or ``~/.kube/config``. Raises :class:`KubeError` saying what to set when none is found."""
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise KubeError(f"cannot read the kubeconfig {kubeconfig}: no such file")
        return _from_kubeconfig(str(kubeconfig))
    host = environ.get(SERVICE_HOST_ENV_NAME)
    if host and (service_account / "token").exists():
        return _in_cluster(host, environ.get(SERVICE_PORT_ENV_NAME) or "443", service_account)
    paths = [
        p
        for p in environ.get("KUBECONFIG", "").split(os.pathsep)
        if p and Path(p).expanduser().is_file()
    ]
    if not paths:
        default = Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"
        paths = [str(default)] if default.is_file() else []
    if paths:
        return _from_kubeconfig(os.pathsep.join(paths))
    raise KubeError(
        "no Kubernetes cluster configured: run the master in the cluster (a service account), "
        "or set KUBECONFIG or resource_manager.kubeconfig to a kubeconfig file"
    )


# -- the API ---------------------------------------------------------------------------------


def _error(method: str, path: str, status: int, data: bytes, phrase: str) -> KubeError:
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    message = str(body.get("message") or data[:300].decode(errors="replace") or phrase)
    reason = str(body.get("reason") or "")
    text = f"Kubernetes API {method} {path}: {message}"
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExistsError(text, status, reason)
    if status == 410:
        return GoneError(text, status, reason)
    return KubeError(text, status, reason)


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """The lines of a streamed answer, each as soon as its chunk arrives."""
    buffer = b""
    for chunk in response.stream(None):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from lines
    if buffer:
        yield buffer


class KubernetesClientApi(KubeApi):
    """:class:`KubeApi` over the official client's ``ApiClient`` (thread-safe: one pool)."""

    def __init__(self, config: KubeConfig, *, timeout: float = 30.0) -> None:
        self.config = config
        self.timeout = timeout
        self._client = ApiClient(config.configuration)

    @staticmethod
    def _path(kind: Kind, namespace: str, name: str = "") -> str:
        path = f"{KINDS[kind]}/namespaces/{quote(namespace, safe='')}/{kind}"
        return f"{path}/{quote(name, safe='')}" if name else path

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request (the library adds the credentials, refreshed when due); the open
        answer, whatever its status."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            request = self._client.param_serialize(
                method,
                path,
                query_params=list(query) or None,
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
            )
            answer = self._client.call_api(
                *request, _request_timeout=timeout or (10.0, self.timeout)
            )
        except ApiException as exc:  # a TLS failure (status 0)
            raise KubeError(
                f"Kubernetes API {method} {path}: {exc.reason}", exc.status or 0
            ) from exc
        except (urllib3.exceptions.HTTPError, OSError, ConfigException) as exc:
            raise KubeError(f"Kubernetes API {method} {path}: {exc}") from exc
        response: urllib3.BaseHTTPResponse = answer.response
        return response

    def _call(
        self,
        method: str,
        path: str,
        ok: Sequence[int],
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
    ) -> tuple[int, Any]:
        """One request and its decoded JSON answer; a status not in ``ok`` raises."""
        response = self._send(method, path, query=query, body=body)
        try:
            data = response.data
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"Kubernetes API {method} {path}: {exc}") from exc
        finally:
            response.release_conn()
        if response.status not in ok:
            raise _error(method, path, response.status, data, response.reason or "")
        if response.status == 404:
            return response.status, None
        try:
            return response.status, json.loads(data)
        except ValueError as exc:
            raise KubeError(f"Kubernetes API {method} {path}: not JSON: {exc}") from exc

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        _, obj = self._call("POST", self._path(kind, namespace), (200, 201, 202), body=body)
        return dict(obj)

    def replace(
        self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        _, obj = self._call("PUT", self._path(kind, namespace, name), (200, 201), body=body)
        return dict(obj)

    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        self._call("DELETE", self._path(kind, namespace, name), (200, 202, 404), body=body)

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        status, obj = self._call("GET", self._path(kind, namespace, name), (200, 404))
        return None if status == 404 else dict(obj)

    def list(
        self, kind: Kind, namespace: str, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        query = [("labelSelector", label_selector)] if label_selector else []
        _, body = self._call("GET", self._path(kind, namespace), (200,), query=query)
        return list(body.get("items") or []), str(body["metadata"].get("resourceVersion", ""))

    def watch(
        self,
        kind: Kind,
        namespace: str,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Generator[WatchEvent, None, None]:
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        path = self._path(kind, namespace)
        response = self._send("GET", path, query=query, timeout=(10.0, timeout_seconds + 30.0))
        try:
            if response.status != 200:
                raise _error("GET", path, response.status, response.data, response.reason or "")
            for line in _lines(response):
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    code = int(obj.get("code") or 0)
                    message = f"watch of {kind}: {obj.get('message', '')}"
                    if code == 410:
                        raise GoneError(message, 410, str(obj.get("reason") or "Expired"))
                    raise KubeError(message, code, str(obj.get("reason") or ""))
                yield WatchEvent(str(event.get("type")), dict(obj))
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"Kubernetes API watch of {kind}: {exc}") from exc
        finally:
            # Ended early (the caller stopped) or not: this connection is not reused mid-stream.
            response.close()
            response.release_conn()

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]
