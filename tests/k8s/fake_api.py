"""A fake Kubernetes API server for the resource manager's tests: a real HTTP server.

Why here (``tests/k8s/``) rather than in the package: it is test infrastructure, driven by tests
(they move pods through their phases), and no user needs it installed. It runs in a thread of
the test process and listens on a real port, so the code under test (the client, the informers,
or a whole ``stalwart master`` subprocess given a kubeconfig pointing here) talks real HTTP.

What it implements, as the real API server does for these calls:

- create (POST, 409 AlreadyExists), replace (PUT), get (404 NotFound), delete (background
  propagation: a Job's pods go with it), list with ``labelSelector`` (``k=v``, ``k!=v``, ``k``,
  ``!k``), for jobs, pods, configmaps, secrets, services, daemonsets and events in namespaces;
- watches (``?watch=1``): events after ``resourceVersion`` (``""``/``"0"``: the current objects
  as ADDED first), ``BOOKMARK`` events every ``bookmark_interval`` when
  ``allowWatchBookmarks=true``, ``timeoutSeconds``, and a ``410 Gone`` ERROR event when the
  version is older than the history kept (``history`` events; :meth:`FakeKube.compact` drops it
  all, as etcd compaction does);
- a Job controller: an Indexed Job's pods (completion index label and annotation), the Job's
  status counts and its Complete/Failed conditions (``backoffLimit``);
- every created or replaced object is validated against the Kubernetes OpenAPI schema
  (kubernetes-validate, ``validate_version``): an invalid one is refused with 422, as a real
  API server would;
- a bearer token, when given, is required (401 otherwise; tests may change ``token`` while it
  runs, as a rotated credential);
- HTTPS with ``tls=True``: a self-signed certificate for 127.0.0.1 (:attr:`FakeKube.ca_pem`
  verifies it), as the in-cluster address of a real API server is always HTTPS.

Tests drive pods with :meth:`FakeKube.schedule`, :meth:`~FakeKube.pulling`,
:meth:`~FakeKube.run` (which gives the pod its IP: a test that runs the pod's command locally
passes ``pod_ip="127.0.0.1"``, so the master's proxy reaches the local process),
:meth:`~FakeKube.succeed`, :meth:`~FakeKube.fail` and :meth:`~FakeKube.image_pull_backoff`.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import secrets
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import kubernetes_validate  # type: ignore[import-untyped]

from stalwart.master.rm.kubernetes.client import KINDS
from tests.tls import self_signed

__all__ = ["ApiError", "FakeKube", "Hold", "matches_selector"]

Key = tuple[str, str, str]
_KIND_NAMES = {
    "jobs": ("Job", "batch/v1"),
    "pods": ("Pod", "v1"),
    "configmaps": ("ConfigMap", "v1"),
    "secrets": ("Secret", "v1"),
    "services": ("Service", "v1"),
    "daemonsets": ("DaemonSet", "apps/v1"),
    "events": ("Event", "v1"),
}
_INDEX = "batch.kubernetes.io/job-completion-index"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def matches_selector(labels: Mapping[str, str], selector: str) -> bool:
    """Whether ``labels`` match a Kubernetes equality-based label selector."""
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class ApiError(Exception):
    """An API error answer (a Kubernetes Status); tests queue them in ``fail_next``."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.body = _status(code, reason, message)


class Hold:
    """Calls held by :meth:`FakeKube.hold`: ``entered`` is set once one arrived; they go on when
    ``released`` is set (:meth:`release`)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()


class FakeKube:
    """The fake API server (see the module docstring). ``start`` returns its URL."""

    def __init__(
        self,
        *,
        history: int = 10_000,
        bookmark_interval: float = 1.0,
        token: str | None = None,
        validate_version: str | None = "1.32",
        tls: bool = False,
    ) -> None:
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.tls = tls
        self.ca_pem = b""
        """With ``tls``: the server's certificate (PEM), the CA a client must trust."""
        self.validate_version = validate_version
        self.objects: dict[Key, dict[str, Any]] = {}
        self.events: list[tuple[int, str, str, str, dict[str, Any]]] = []
        self.oldest = 0
        """Watches from a version below this get 410 Gone."""
        self.rv = 100
        self.cond = threading.Condition()
        self.requests: list[tuple[str, str]] = []
        self.fail_next: dict[tuple[str, str], ApiError] = {}
        """The next call of (method, kind) fails with this error (once)."""
        self.holds: dict[tuple[str, str], Hold] = {}
        """Calls of (method, kind) wait until their :class:`Hold` is released (a slow or hung
        API server); see :meth:`hold`."""
        self.refuse_watches = False
        """While true, new watch requests get 503 (a flaky API server)."""
        self.refused_watches = 0
        self.pod_ips = 0
        """Pod IPs handed out so far (:meth:`run`)."""
        self._server: ThreadingHTTPServer | None = None
        self._closing = False
        self.url = ""

    # -- life --------------------------------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(_Handler):
            kube = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        scheme = "http"
        if self.tls:
            self.ca_pem, key_pem = self_signed("fake-kube")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            with tempfile.TemporaryDirectory() as directory:
                cert, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
                cert.write_bytes(self.ca_pem)
                key.write_bytes(key_pem)
                context.load_cert_chain(cert, key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            scheme = "https"
        self._server = server
        threading.Thread(target=server.serve_forever, name="fake-kube", daemon=True).start()
        self.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
        return self.url

    def hold(self, method: str, kind: str) -> Hold:
        """Make every ``method`` call on ``kind`` (``POST``, ``configmaps``) wait until the
        returned hold is released (at most a minute, then it goes on)."""
        held = Hold()
        self.holds[(method, kind)] = held
        return held

    @property
    def port(self) -> int:
        return int(urlparse(self.url).port or 0)

    def stop(self) -> None:
        self._closing = True
        with self.cond:
            self.cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def kubeconfig(self, namespace: str = "default", user: Mapping[str, Any] | None = None) -> str:
        """A kubeconfig (YAML text) whose current context is this server; its user has
        ``user``'s credentials (default: the server's token)."""
        if user is None:
            user = {"token": self.token} if self.token else {}
        cluster: dict[str, Any] = {"server": self.url}
        if self.tls:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "fake", "user": dict(user)}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
        return json.dumps(doc)

    # -- storage -----------------------------------------------------------------------------

    def _record(self, kind: str, ns: str, type_: str, obj: dict[str, Any]) -> None:
        """Store a change with a new resource version (call with ``cond`` held)."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (kind, ns, obj["metadata"]["name"])
        if type_ == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.events.append((self.rv, kind, ns, type_, copy.deepcopy(obj)))
        if len(self.events) > self.history:
            drop = len(self.events) - self.history
            self.oldest = self.events[drop - 1][0] + 1
            del self.events[:drop]
        self.cond.notify_all()

    def compact(self) -> None:
        """Forget the whole history: watches from any version seen so far get 410 Gone."""
        with self.cond:
            self.events.clear()
            self.oldest = self.rv + 1
            self.cond.notify_all()

    def _validate(self, kind: str, obj: Mapping[str, Any]) -> None:
        if self.validate_version is None or kind == "events":
            return
        try:
            kubernetes_validate.validate(dict(obj), self.validate_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            raise ApiError(422, "Invalid", f"{kind} is invalid: {path}: {exc.message}") from exc

    def create(self, kind: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", f"{kind}: metadata.name: Required value")
        self._validate(kind, obj)
        with self.cond:
            if (kind, ns, name) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists')
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
            if kind == "jobs":
                obj["status"] = {"active": 0, "succeeded": 0, "failed": 0}
            if kind == "daemonsets":
                obj["metadata"]["generation"] = 1
            self._record(kind, ns, "ADDED", obj)
            if kind == "jobs":
                self._start_job(ns, obj)
            return copy.deepcopy(obj)

    def replace(self, kind: str, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._validate(kind, body)
        with self.cond:
            old = self.objects.get((kind, ns, name))
            if old is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            obj = copy.deepcopy(body)
            obj["metadata"] = {**old["metadata"], **obj.get("metadata", {})}
            obj["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
            self._record(kind, ns, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def delete(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        with self.cond:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            self._record(kind, ns, "DELETED", copy.deepcopy(obj))
            if kind == "jobs":
                for pod in self._job_pods(ns, name):
                    self._record("pods", ns, "DELETED", pod)
            return _status(200, "", "deleted") | {"status": "Success"}

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        with self.cond:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            return copy.deepcopy(obj)

    def list_objects(self, kind: str, ns: str, selector: str = "") -> dict[str, Any]:
        with self.cond:
            items = [
                copy.deepcopy(o)
                for (k, n, _), o in sorted(self.objects.items())
                if k == kind
                and n == ns
                and matches_selector(o["metadata"].get("labels") or {}, selector)
            ]
            name, version = _KIND_NAMES[kind]
            return {
                "kind": name + "List",
                "apiVersion": version,
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }

    def watch(
        self, kind: str, ns: str, selector: str, version: str, bookmarks: bool, timeout: float
    ) -> Iterator[dict[str, Any]]:
        """The watch's events (see the module docstring), until ``timeout`` or shutdown."""
        deadline = time.monotonic() + timeout
        with self.cond:
            if version in ("", "0"):
                since = self.rv
                initial = [
                    {"type": "ADDED", "object": copy.deepcopy(o)}
                    for (k, n, _), o in sorted(self.objects.items())
                    if k == kind
                    and n == ns
                    and matches_selector(o["metadata"].get("labels") or {}, selector)
                ]
            else:
                since = int(version)
                initial = []
                if since < self.oldest - 1:
                    status = _status(
                        410, "Expired", f"too old resource version: {since} ({self.oldest})"
                    )
                    yield {"type": "ERROR", "object": status}
                    return
        yield from initial
        last_bookmark = time.monotonic()
        while not self._closing and time.monotonic() < deadline:
            with self.cond:
                scanned = self.rv  # every event up to here is examined below
                pending = [
                    e
                    for e in self.events
                    if since < e[0] <= scanned
                    and e[1] == kind
                    and e[2] == ns
                    and matches_selector(e[4]["metadata"].get("labels") or {}, selector)
                ]
                if not pending:
                    self.cond.wait(min(0.2, max(0.0, deadline - time.monotonic())))
            for _, _, _, type_, obj in pending:
                yield {"type": type_, "object": obj}
            since = scanned
            if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                last_bookmark = time.monotonic()
                name, api_version = _KIND_NAMES[kind]
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": name,
                        "apiVersion": api_version,
                        "metadata": {"resourceVersion": str(since)},
                    },
                }

    # -- the Job controller ------------------------------------------------------------------

    def _job_pods(self, ns: str, job: str) -> list[dict[str, Any]]:
        return [
            o
            for (k, n, _), o in sorted(self.objects.items())
            if k == "pods"
            and n == ns
            and (o["metadata"].get("labels") or {}).get("job-name") == job
        ]

    def _start_job(self, ns: str, job: dict[str, Any]) -> None:
        spec = job["spec"]
        template = spec["template"]
        name = job["metadata"]["name"]
        for index in range(int(spec.get("completions") or spec.get("parallelism") or 1)):
            labels = {
                **(template.get("metadata", {}).get("labels") or {}),
                "job-name": name,
                "batch.kubernetes.io/job-name": name,
                _INDEX: str(index),
            }
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{index}-{secrets.token_hex(3)[:5]}",
                    "namespace": ns,
                    "uid": str(uuid.uuid4()),
                    "labels": labels,
                    "annotations": {
                        **(template.get("metadata", {}).get("annotations") or {}),
                        _INDEX: str(index),
                    },
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": name,
                            "uid": job["metadata"]["uid"],
                        }
                    ],
                },
                "spec": copy.deepcopy(template["spec"]),
                "status": {"phase": "Pending"},
            }
            self._record("pods", ns, "ADDED", pod)
        self._update_job(ns, name)

    def _update_job(self, ns: str, name: str) -> None:
        job = self.objects.get(("jobs", ns, name))
        if job is None:
            return
        pods = self._job_pods(ns, name)
        phases = [p["status"].get("phase") for p in pods]
        status = dict(job.get("status") or {})
        status["active"] = sum(p in ("Pending", "Running") for p in phases)
        status["succeeded"] = phases.count("Succeeded")
        status["failed"] = phases.count("Failed")
        conditions = []
        if status["failed"] > int(job["spec"].get("backoffLimit", 6)):
            conditions.append(
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastTransitionTime": _now(),
                }
            )
        elif status["succeeded"] >= int(job["spec"].get("completions") or 1):
            conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": _now()})
        status["conditions"] = conditions
        if status != job.get("status"):
            updated = copy.deepcopy(job)
            updated["status"] = status
            self._record("jobs", ns, "MODIFIED", updated)

    # -- driving pods (tests) ----------------------------------------------------------------

    def pods(self, ns: str = "default", selector: str = "") -> list[dict[str, Any]]:
        """The pods of ``ns`` matching ``selector`` (copies)."""
        return list(self.list_objects("pods", ns, selector)["items"])

    def wait_for_pods(
        self, ns: str, selector: str, count: int = 1, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """Wait until ``count`` pods match; them (sorted by name). Raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.pods(ns, selector)
            if len(found) >= count:
                return sorted(found, key=lambda p: p["metadata"]["name"])
            with self.cond:
                self.cond.wait(0.2)
        raise TimeoutError(f"no {count} pod(s) matching {selector!r} within {timeout:g}s")

    def _change_pod(self, ns: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        with self.cond:
            pod = copy.deepcopy(self.objects[("pods", ns, name)])
            change(pod)
            self._record("pods", ns, "MODIFIED", pod)
            job = (pod["metadata"].get("labels") or {}).get("job-name")
            if job:
                self._update_job(ns, job)

    def _event(self, ns: str, pod: str, reason: str, message: str, type_: str = "Normal") -> None:
        with self.cond:
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{pod}.{secrets.token_hex(4)}", "namespace": ns},
                "involvedObject": {"kind": "Pod", "name": pod, "namespace": ns},
                "reason": reason,
                "message": message,
                "type": type_,
                "firstTimestamp": _now(),
            }
            self._record("events", ns, "ADDED", event)

    def _containers(
        self, pod: dict[str, Any], state: dict[str, Any], ready: bool
    ) -> list[dict[str, Any]]:
        return [
            {
                "name": c["name"],
                "image": c["image"],
                "ready": ready,
                "restartCount": 0,
                "state": copy.deepcopy(state),
            }
            for c in pod["spec"]["containers"]
        ]

    def schedule(
        self, name: str, ns: str = "default", node: str = "node-1", at: str | None = None
    ) -> None:
        """The scheduler put the pod on ``node`` (PodScheduled True)."""

        def change(pod: dict[str, Any]) -> None:
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": at or _now()}
            ]

        self._change_pod(ns, name, change)
        self._event(ns, name, "Scheduled", f"Successfully assigned {ns}/{name} to {node}")

    def unschedulable(self, name: str, message: str, ns: str = "default") -> None:
        """The scheduler cannot place the pod (PodScheduled False, Unschedulable)."""

        def change(pod: dict[str, Any]) -> None:
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ]

        self._change_pod(ns, name, change)

    def pulling(self, name: str, ns: str = "default") -> None:
        """The kubelet pulls the image (containers waiting in ContainerCreating)."""

        def change(pod: dict[str, Any]) -> None:
            state = {"waiting": {"reason": "ContainerCreating"}}
            pod["status"]["containerStatuses"] = self._containers(pod, state, False)

        self._change_pod(ns, name, change)
        self._event(ns, name, "Pulling", "Pulling image")

    def run(
        self, name: str, ns: str = "default", at: str | None = None, pod_ip: str | None = None
    ) -> None:
        """Every container runs (phase Running). The pod gets its IP (``status.podIP``,
        ``podIPs``) and its node's (``hostIP``), as the kubelet reports them once the pod's
        sandbox is up: ``pod_ip`` (``127.0.0.1`` for a pod whose command the test runs as a
        local process), else the next address of the pod network ``10.244.0.0/16``."""
        with self.cond:
            self.pod_ips += 1
            ip = pod_ip or f"10.244.{self.pod_ips // 250}.{self.pod_ips % 250 + 2}"

        def change(pod: dict[str, Any]) -> None:
            pod["status"]["phase"] = "Running"
            pod["status"]["startTime"] = at or _now()
            pod["status"]["podIP"] = ip
            pod["status"]["podIPs"] = [{"ip": ip}]
            pod["status"]["hostIP"] = "192.168.0.10"
            state = {"running": {"startedAt": at or _now()}}
            pod["status"]["containerStatuses"] = self._containers(pod, state, True)

        self._change_pod(ns, name, change)
        self._event(ns, name, "Started", "Started container")

    def _terminate(self, name: str, ns: str, code: int, reason: str, message: str | None) -> None:
        def change(pod: dict[str, Any]) -> None:
            pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            term: dict[str, Any] = {"exitCode": code, "reason": reason, "finishedAt": _now()}
            started = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get(
                "running", {}
            )
            if started.get("startedAt"):
                term["startedAt"] = started["startedAt"]
            if message:
                term["message"] = message
            pod["status"]["containerStatuses"] = self._containers(pod, {"terminated": term}, False)

        self._change_pod(ns, name, change)

    def succeed(self, name: str, ns: str = "default") -> None:
        """The pod's containers exited 0 (phase Succeeded)."""
        self._terminate(name, ns, 0, "Completed", None)

    def fail(
        self, name: str, code: int = 1, ns: str = "default", message: str | None = None
    ) -> None:
        """The pod's task container exited with ``code`` (phase Failed)."""
        self._terminate(name, ns, code, "Error", message)

    def image_pull_backoff(self, name: str, message: str, ns: str = "default") -> None:
        """The image cannot be pulled: ImagePullBackOff with the registry's ``message``."""

        def change(pod: dict[str, Any]) -> None:
            state = {"waiting": {"reason": "ImagePullBackOff", "message": message}}
            pod["status"]["containerStatuses"] = self._containers(pod, state, False)

        self._change_pod(ns, name, change)
        self._event(ns, name, "Failed", message, "Warning")


class _Handler(BaseHTTPRequestHandler):
    kube: FakeKube
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, str, str, dict[str, list[str]]]:
        url = urlparse(self.path)
        parts = [p for p in url.path.split("/") if p]
        # /api/v1/namespaces/ns/kind[/name] or /apis/group/version/namespaces/ns/kind[/name]
        head = 2 if parts[:1] == ["api"] else 3
        if len(parts) < head + 3 or parts[head] != "namespaces":
            raise ApiError(404, "NotFound", f"the server could not find {url.path}")
        ns, kind = parts[head + 1], parts[head + 2]
        name = parts[head + 3] if len(parts) > head + 3 else ""
        if KINDS.get(kind) != "/" + "/".join(parts[:head]):
            raise ApiError(404, "NotFound", f"the server could not find {url.path}")
        return kind, ns, name, parse_qs(url.query)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b"{}"
        return dict(json.loads(data or b"{}"))

    def _handle(self, method: str) -> None:
        kube = self.kube
        # Read the body first, whatever the answer: an unread body would corrupt the next
        # request on this keep-alive connection.
        body = self._body() if method in ("POST", "PUT", "DELETE") else {}
        try:
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if kube.token and (scheme.lower() != "bearer" or token != kube.token):
                raise ApiError(401, "Unauthorized", "Unauthorized")
            kind, ns, name, query = self._route()
            kube.requests.append((method, self.path))
            failure = kube.fail_next.pop((method, kind), None)
            if failure is not None:
                raise failure
            held = kube.holds.get((method, kind))
            if held is not None:
                held.entered.set()
                held.released.wait(60)
            selector = (query.get("labelSelector") or [""])[0]
            if method == "GET" and (query.get("watch") or [""])[0] in ("1", "true"):
                if kube.refuse_watches:
                    kube.refused_watches += 1
                    raise ApiError(503, "ServiceUnavailable", "the server is shutting down")
                self._watch(kind, ns, selector, query)
                return
            if method == "GET":
                self._send(
                    200, kube.get(kind, ns, name) if name else kube.list_objects(kind, ns, selector)
                )
            elif method == "POST":
                self._send(201, kube.create(kind, ns, body))
            elif method == "PUT":
                self._send(200, kube.replace(kind, ns, name, body))
            elif method == "DELETE":
                self._send(200, kube.delete(kind, ns, name))
        except ApiError as exc:
            self._send(int(exc.body["code"]), exc.body)

    def _watch(self, kind: str, ns: str, selector: str, query: dict[str, list[str]]) -> None:
        version = (query.get("resourceVersion") or [""])[0]
        bookmarks = (query.get("allowWatchBookmarks") or [""])[0] == "true"
        timeout = float((query.get("timeoutSeconds") or ["60"])[0])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in self.kube.watch(kind, ns, selector, version, bookmarks, timeout):
                data = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")
