"""A small Kubernetes API client over plain HTTP (httpx): the calls the resource manager uses.

:class:`KubeApi` is the interface (its implementations: :class:`HttpKubeApi` against a real API
server or the shipped fake, ``tests/k8s/fake_api.py``). Objects are plain JSON mappings.
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
``$KUBECONFIG``, else ``~/.kube/config``), or the pod's service account when the master runs
in the cluster.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml

__all__ = [
    "KINDS",
    "AlreadyExistsError",
    "GoneError",
    "HttpKubeApi",
    "Kind",
    "KubeApi",
    "KubeConfig",
    "KubeError",
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

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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


@dataclass(frozen=True)
class KubeConfig:
    """Where the API server is and how to authenticate."""

    server: str
    token: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    namespace: str | None = None


def _data_file(data: str, suffix: str) -> str:
    fd, path = tempfile.mkstemp(prefix="stalwart-kube-", suffix=suffix)
    with os.fdopen(fd, "wb") as stream:
        stream.write(base64.b64decode(data))
    return path


def _from_kubeconfig(path: Path) -> KubeConfig:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeError(f"cannot read the kubeconfig {path}: {exc}") from exc
    contexts = {c["name"]: c.get("context") or {} for c in doc.get("contexts") or []}
    clusters = {c["name"]: c.get("cluster") or {} for c in doc.get("clusters") or []}
    users = {u["name"]: u.get("user") or {} for u in doc.get("users") or []}
    name = doc.get("current-context") or next(iter(contexts), None)
    context = contexts.get(name or "")
    if context is None or context.get("cluster") not in clusters:
        raise KubeError(
            f"the kubeconfig {path} has no usable current context: run `kubectl config "
            "use-context NAME` or set resource_manager.kubeconfig to another file"
        )
    cluster = clusters[context["cluster"]]
    user = users.get(context.get("user") or "", {})
    base = path.parent

    def _file(entry: Mapping[str, Any], key: str, suffix: str) -> str | None:
        if entry.get(f"{key}-data"):
            return _data_file(str(entry[f"{key}-data"]), suffix)
        if entry.get(key):
            return str((base / str(entry[key])).resolve())
        return None

    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(str(user["tokenFile"])).read_text(encoding="utf-8").strip()
    return KubeConfig(
        server=str(cluster.get("server") or "").rstrip("/"),
        token=str(token) if token else None,
        ca_file=_file(cluster, "certificate-authority", ".crt"),
        cert_file=_file(user, "client-certificate", ".crt"),
        key_file=_file(user, "client-key", ".key"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        namespace=context.get("namespace"),
    )


def load_config(kubeconfig: Path | None, environ: Mapping[str, str]) -> KubeConfig:
    """The cluster to talk to: ``kubeconfig``; else in-cluster (a service account token and
    ``KUBERNETES_SERVICE_HOST``); else ``$KUBECONFIG`` or ``~/.kube/config``. Raises
    :class:`KubeError` saying what to set when none is found."""
    if kubeconfig is not None:
        return _from_kubeconfig(kubeconfig)
    host = environ.get("KUBERNETES_SERVICE_HOST")
    if host and (_SA_DIR / "token").exists():
        port = environ.get("KUBERNETES_SERVICE_PORT", "443")
        return KubeConfig(
            server=f"https://{host}:{port}",
            token=(_SA_DIR / "token").read_text(encoding="utf-8").strip(),
            ca_file=str(_SA_DIR / "ca.crt"),
            namespace=(_SA_DIR / "namespace").read_text(encoding="utf-8").strip(),
        )
    candidates = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    candidates.append(str(Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"))
    for candidate in candidates:
        if Path(candidate).is_file():
            return _from_kubeconfig(Path(candidate))
    raise KubeError(
        "no Kubernetes cluster configured: run the master in the cluster (a service account), "
        "or set KUBECONFIG or resource_manager.kubeconfig to a kubeconfig file"
    )


def _error(response: httpx.Response) -> KubeError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    message = str(body.get("message") or response.text[:300] or response.reason_phrase)
    reason = str(body.get("reason") or "")
    code = response.status_code
    text = f"Kubernetes API {response.request.method} {response.request.url.path}: {message}"
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExistsError(text, code, reason)
    if code == 410:
        return GoneError(text, code, reason)
    return KubeError(text, code, reason)


class HttpKubeApi(KubeApi):
    """:class:`KubeApi` over httpx (thread-safe: one connection pool)."""

    def __init__(self, config: KubeConfig, *, timeout: float = 30.0) -> None:
        self.config = config
        headers = {"Accept": "application/json"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        verify: bool | str = not config.insecure
        if config.ca_file and not config.insecure:
            verify = config.ca_file
        cert = (config.cert_file, config.key_file) if config.cert_file and config.key_file else None
        self._client = httpx.Client(
            base_url=config.server,
            headers=headers,
            verify=verify,
            cert=cert,
            timeout=httpx.Timeout(timeout, connect=10.0),
        )

    @staticmethod
    def _path(kind: Kind, namespace: str, name: str = "") -> str:
        path = f"{KINDS[kind]}/namespaces/{namespace}/{kind}"
        return f"{path}/{name}" if name else path

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise KubeError(f"Kubernetes API {method} {path}: {exc}") from exc

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        response = self._call("POST", self._path(kind, namespace), json=dict(body))
        if response.status_code not in (200, 201, 202):
            raise _error(response)
        return dict(response.json())

    def replace(
        self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        response = self._call("PUT", self._path(kind, namespace, name), json=dict(body))
        if response.status_code not in (200, 201):
            raise _error(response)
        return dict(response.json())

    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        response = self._call("DELETE", self._path(kind, namespace, name), json=body)
        if response.status_code not in (200, 202, 404):
            raise _error(response)

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        response = self._call("GET", self._path(kind, namespace, name))
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise _error(response)
        return dict(response.json())

    def list(
        self, kind: Kind, namespace: str, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        params = {"labelSelector": label_selector} if label_selector else {}
        response = self._call("GET", self._path(kind, namespace), params=params)
        if response.status_code != 200:
            raise _error(response)
        body = response.json()
        return list(body.get("items") or []), str(body["metadata"].get("resourceVersion", ""))

    def watch(
        self,
        kind: Kind,
        namespace: str,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Generator[WatchEvent, None, None]:
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        timeout = httpx.Timeout(timeout_seconds + 30.0, connect=10.0)
        path = self._path(kind, namespace)
        try:
            with self._client.stream("GET", path, params=params, timeout=timeout) as response:
                if response.status_code != 200:
                    response.read()
                    raise _error(response)
                for line in response.iter_lines():
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
        except httpx.HTTPError as exc:
            raise KubeError(f"Kubernetes API watch of {kind}: {exc}") from exc

    def close(self) -> None:
        self._client.close()
