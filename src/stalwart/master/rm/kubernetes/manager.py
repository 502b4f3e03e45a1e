"""The Kubernetes resource manager: the :class:`~stalwart.master.rm.base.ResourceManager` when
``resource_manager.type: kubernetes``.

The loop calls two methods each round, without the state lock: every API call happens with no
lock and no transaction held, and what it answers is applied in a short step under the lock
(database rows are the truth; the informers' caches are rebuilt from the API after a restart,
so a new master reattaches to the Jobs of the old one by their labels,
:meth:`KubernetesManager.reattach`):

- :meth:`KubernetesManager.sync` (before the loop ends allocations): starts the Job and Pod
  informers on first use (watches of the objects labelled with this cluster's id; every event
  pokes the loop) and waits for their first list; deletes the Jobs of allocations being killed;
  reads each live allocation's Job and pods from the caches and records what they say
  (:func:`~stalwart.master.rm.kubernetes.states.allocation_status`): PULLING once a pod is on a
  node,
  RUNNING once every pod runs (with the pull time in the trial's logs), EXITED with the task's
  exit code; one failed pod kills the others (all-or-nothing); pods that do not all run within
  ``gang_timeout_seconds`` of the first are killed; a pull that cannot succeed
  (``ImagePullBackOff``) fails the trial at once with the registry's message; a Job that
  vanished (not in the cache, and a direct read says so) exits its allocation. After an exit
  the ConfigMap and Secrets are deleted (the Job stays until its TTL, for ``kubectl``), also
  for an allocation the launcher's ``batch/exit`` ended before a round saw its pod finish
  (:meth:`KubernetesManager._sweep`). Every API call happens outside database transactions.
  Returns the trial exits of allocations that could never run.
- :meth:`KubernetesManager.schedule`: claims each PENDING
  allocation, then creates its ConfigMap, Secrets (token; registry auth), headless Service
  (multi-pod) and Job outside any transaction, and records the Job's name. A transient failure
  (API down, throttled, a ResourceQuota exceeded) leaves the allocation claimed and retried next
  round; objects that already exist (a master that stopped midway) count as created; an invalid
  object fails the trial with the API's message.
- Every ``prepull.refresh_seconds``, :meth:`KubernetesManager.refresh_prepull` recomputes the
  pre-pull plan and creates, updates or deletes the pools' DaemonSets.

Allocations are trials' or interactive tasks' (commands, notebooks, shells, TensorBoards: one
pod each, the same launcher); :meth:`KubernetesManager.service_host` tells the master's proxy
where a task's service listens: its pod's IP, read from the Pod informer's cache.

All API calls go through :class:`~stalwart.master.rm.kubernetes.queue.RateLimitedApi`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.agent.protocol import DeviceType
from stalwart.environments.prepull import PrepullSettings
from stalwart.master.cluster.lifecycle import TrialExit, end_allocation, master_log
from stalwart.master.db.tables import Allocation, Container
from stalwart.master.rm import batchjobs
from stalwart.master.rm.base import (
    BatchLauncher,
    Prepull,
    Reattaches,
    ResourceManager,
    ServiceAddresses,
)
from stalwart.master.rm.kubernetes import allocations as rows
from stalwart.master.rm.kubernetes.client import (
    AlreadyExistsError,
    Kind,
    KubeApi,
    KubeError,
    KubernetesClientApi,
    load_config,
)
from stalwart.master.rm.kubernetes.informer import Informer
from stalwart.master.rm.kubernetes.manifests import (
    ALLOCATION_LABEL,
    LABEL_PREFIX,
    allocation_objects,
    job_name,
    label_value,
    pod_slots,
)
from stalwart.master.rm.kubernetes.podspec import TASK_CONTAINER
from stalwart.master.rm.kubernetes.prepull import (
    PLAN_ANNOTATION,
    PREPULL_LABEL,
    daemonset_manifest,
    daemonset_name,
    plan_hash,
)
from stalwart.master.rm.kubernetes.queue import RateLimitedApi
from stalwart.master.rm.kubernetes.settings import K8S_AGENT, KubernetesSettings
from stalwart.master.rm.kubernetes.states import (
    allocation_status,
    pod_address,
    pod_rank,
    pod_view,
    pull_seconds,
)
from stalwart.master.services.allocations import record_pull_time
from stalwart.master.services.prepull import plan_for, queued_experiment_images
from stalwart.master.state import MasterState

__all__ = ["SYNC_TIMEOUT_S", "KubernetesManager", "master_url_for"]

log = logging.getLogger("stalwart.k8s")

SYNC_TIMEOUT_S = 5.0
"""How long a round waits for the informers' first list before giving up until the next."""

_PLURAL: Mapping[str, Kind] = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Service": "services",
    "Job": "jobs",
}


def master_url_for(host: str, port: int, settings: KubernetesSettings) -> str:
    """The master's URL as pods reach it (``master_url``, else ``http://host:port``)."""
    if settings.master_url:
        return settings.master_url.rstrip("/")
    if host in ("0.0.0.0", "::", ""):
        host = os.uname().nodename
    return f"http://{host}:{port}"


class KubernetesManager(ResourceManager, Reattaches, Prepull, BatchLauncher, ServiceAddresses):
    """Kubernetes as the master's resource manager (see the module docstring)."""

    name = "Kubernetes"
    container_agent = K8S_AGENT

    def __init__(self, state: MasterState, *, api: KubeApi | None = None) -> None:
        super().__init__(state)
        settings = state.settings.resource_manager
        if not isinstance(settings, KubernetesSettings):
            raise TypeError("KubernetesManager needs resource_manager.type: kubernetes")
        self.k8s = settings
        self.sessions = state.sessions
        self.master_url = master_url_for(state.settings.host, state.settings.port, settings)
        if not settings.master_url and state.settings.host in ("127.0.0.1", "localhost", "::1"):
            log.warning(
                "pods will call the master at %s, a loopback address they cannot reach: set "
                "resource_manager.master_url to the master's Service URL",
                self.master_url,
            )
        if api is None:
            api = KubernetesClientApi(load_config(settings.kubeconfig, os.environ))
        self.api = RateLimitedApi(api, qps=settings.api_qps, burst=settings.api_burst)
        self.selector = f"stalwart.dev/cluster={label_value(state.cluster_id)}"
        self.jobs = {
            ns: Informer(self.api, "jobs", ns, self.selector, on_change=state.hints.poke)
            for ns in settings.namespaces()
        }
        self.pods = {
            ns: Informer(self.api, "pods", ns, self.selector, on_change=state.hints.poke)
            for ns in settings.namespaces()
        }
        self._deleted: set[str] = set()
        self._cleaned: set[str] = set()
        self._after_commit: list[tuple[str, int, bool]] = []
        """(allocation, pods, delete the Job too) to delete once the round's writes commit."""
        self._logged: dict[str, str] = {}
        self._gang_since: dict[str, float] = {}
        self._prepull_at: float | None = None
        self._swept: set[str] = set()
        """Jobs of ended allocations whose ConfigMap and Secrets were deleted (see
        :meth:`_sweep`)."""

    def close(self) -> None:
        """Stop the informers and release connections; idempotent."""
        for informer in self._informers():
            informer.stop()
        self.api.close()

    def _informers(self) -> list[Informer]:
        return [*self.jobs.values(), *self.pods.values()]

    def _job(self, name: str) -> dict[str, Any] | None:
        """The cached Job ``name``, in whichever watched namespace it is."""
        for informer in self.jobs.values():
            job = informer.get(name)
            if job is not None:
                return job
        return None

    def _namespaces_of(self, allocation_id: str) -> list[str]:
        """Where the allocation's objects are: its Job's namespace when cached, else every
        watched namespace (deletes are idempotent)."""
        job = self._job(job_name(allocation_id))
        if job is not None:
            return [str(job["metadata"].get("namespace") or self.k8s.namespace)]
        return self.k8s.namespaces()

    def service_host(self, session: Session, allocation_id: str, rank: int = 0) -> str | None:
        """Where the master reaches the service of pod ``rank``: the pod's IP
        (``status.podIP``, from the Pod informer's cache) while it runs; None once it ended;
        else the address its launcher reported at ``batch/start`` (its own address on the
        route to the master: the pod's IP too), for a cache that has not seen the pod run yet
        (a master that just started); None before either is known. Reads the caches and the
        database only: thread-safe, no API call (the proxy calls it on every request)."""
        key = label_value(allocation_id)
        for pod in (p for informer in self.pods.values() for p in informer.objects()):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get(ALLOCATION_LABEL) == key and pod_rank(pod) == rank:
                address = pod_address(pod)
                if address is not None:
                    return address
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    return None  # it ended: nothing listens any more
        row = session.get(Container, (allocation_id, rank))
        if row is None or row.state == "EXITED":
            return None
        return batchjobs.node_address(row)

    # -- sync --------------------------------------------------------------------------------

    def reattach(self) -> None:
        """Start the Job and Pod informers: their first list finds the Jobs of every live
        allocation, a master restarted meanwhile included (by this cluster's label)."""
        for informer in self._informers():
            informer.start()

    def _ready(self) -> bool:
        self.reattach()
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        for informer in self._informers():
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                log.warning(
                    "the %s informer of namespace %s has not listed yet; retrying",
                    informer.kind,
                    informer.namespace,
                )
                return False
        return True

    def sync(self) -> list[TrialExit]:
        """Kill, observe, record (see the module docstring)."""
        if not self._ready():
            return []
        self._kill()
        exits = self._observe()
        with self.step() as session:
            exits += batchjobs.end_rejected(session, K8S_AGENT)
            session.commit()
        if self.k8s.prepull.enabled:
            now = self.state.clock.monotonic()
            if (
                self._prepull_at is None
                or now - self._prepull_at >= self.k8s.prepull.refresh_seconds
            ):
                self._prepull_at = now
                self.refresh_prepull()
        return exits

    def _delete_objects(self, allocation_id: str, pods: int) -> None:
        """Delete the Job (its pods follow) and the allocation's other objects; idempotent."""
        name = job_name(allocation_id)
        kinds: list[Kind] = ["jobs", "configmaps", "secrets"]
        if pods > 1:
            kinds.append("services")
        for ns in self._namespaces_of(allocation_id):
            for kind in kinds:
                self.api.delete(kind, ns, name)
            self.api.delete("secrets", ns, name + "-registry")
        self._deleted.add(allocation_id)

    def _clean_up(self, allocation_id: str, pods: int) -> None:
        """After an exit: delete the ConfigMap, Secrets and Service (the token goes with them);
        the Job stays for inspection until its ``ttlSecondsAfterFinished``."""
        if allocation_id in self._cleaned or allocation_id in self._deleted:
            return
        name = job_name(allocation_id)
        try:
            for ns in self._namespaces_of(allocation_id):
                self.api.delete("configmaps", ns, name)
                self.api.delete("secrets", ns, name)
                self.api.delete("secrets", ns, name + "-registry")
                if pods > 1:
                    self.api.delete("services", ns, name)
        except KubeError as exc:
            log.warning("cleaning up after allocation %s failed (retrying): %s", allocation_id, exc)
            return
        self._cleaned.add(allocation_id)

    def _kill(self) -> None:
        with self.step() as session:
            batchjobs.stop_unstarted(session, K8S_AGENT)
            dying = [
                (a.id, a.slots)
                for a in batchjobs.terminating(session, K8S_AGENT, "killed before its Job existed")
            ]
            session.commit()
        for allocation_id, slots in dying:
            if allocation_id in self._deleted:
                continue
            try:
                self._delete_objects(
                    allocation_id, len(pod_slots(slots, self.k8s.max_slots_per_pod))
                )
            except KubeError as exc:
                log.warning("deleting the Job of %s failed (retrying): %s", allocation_id, exc)
            else:
                log.info("deleted the Job of allocation %s", allocation_id)

    def _pods_by_allocation(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for pod in (p for informer in self.pods.values() for p in informer.objects()):
            labels = pod.get("metadata", {}).get("labels") or {}
            key = labels.get(ALLOCATION_LABEL)
            if key:
                out.setdefault(str(key), []).append(pod)
        return out

    def _observe(self) -> list[TrialExit]:
        exits: list[TrialExit] = []
        with self.sessions() as session:  # reads only
            every = [(a.id, a.batch_job_id) for a in batchjobs.live_allocations(session, K8S_AGENT)]
        self._forget({allocation_id for allocation_id, _ in every})
        # A Job the informer has not seen yet (a watch lagging behind our own create) is read
        # directly before it may be called gone.
        fetched: dict[str, dict[str, Any] | None] = {}
        for allocation_id, name in every:
            if name is not None and self._job(str(name)) is None:
                fetched[str(name)] = self._get_job(allocation_id, str(name))
        by_allocation = self._pods_by_allocation()
        self._after_commit = []
        with self.step() as session:
            for allocation in batchjobs.live_allocations(session, K8S_AGENT):
                if allocation.batch_job_id is None:
                    continue
                exit_ = self._observe_one(session, allocation, by_allocation, fetched)
                if exit_ is not None:
                    exits.append(exit_)
            session.commit()
        for allocation_id, pods, whole in self._after_commit:  # API calls: after the commit
            if whole:
                self._delete_quietly(allocation_id, pods)
            else:
                self._clean_up(allocation_id, pods)
        self._sweep({allocation_id for allocation_id, _ in every})
        return exits

    def _sweep(self, live: set[str]) -> None:
        """Delete the ConfigMap, Secrets and Service of Jobs whose allocation already ended
        (once per Job): an allocation the launcher's ``batch/exit`` ended (a command that
        finished, a trial run to completion) is TERMINATED before any round saw its pod
        finish, so :meth:`_observe` never cleaned up after it. The Job itself stays until its
        ``ttlSecondsAfterFinished``; a Job of an allocation the database does not know is
        left alone."""
        cached = {
            str(job["metadata"]["name"]): job
            for informer in self.jobs.values()
            for job in informer.objects()
        }
        self._swept &= set(cached)
        ended: dict[str, tuple[str, str]] = {}
        for name, job in cached.items():
            meta = job["metadata"]
            allocation_id = (meta.get("annotations") or {}).get(LABEL_PREFIX + "allocation-id")
            if name in self._swept or not allocation_id or allocation_id in live:
                continue
            ended[str(allocation_id)] = (name, str(meta.get("namespace") or self.k8s.namespace))
        if not ended:
            return
        with self.sessions() as session:  # reads only
            known = set(
                session.scalars(
                    select(Allocation.id).where(
                        Allocation.id.in_(sorted(ended)), Allocation.state == "TERMINATED"
                    )
                )
            )
        for allocation_id in sorted(known):
            name, ns = ended[allocation_id]
            try:
                self.api.delete("configmaps", ns, name)
                self.api.delete("secrets", ns, name)
                self.api.delete("secrets", ns, name + "-registry")
                self.api.delete("services", ns, name)
            except KubeError as exc:
                log.warning(
                    "cleaning up after allocation %s failed (retrying): %s", allocation_id, exc
                )
                continue
            self._swept.add(name)

    def _get_job(self, allocation_id: str, name: str) -> dict[str, Any] | None:
        """The Job from the API: None when it is gone; ``{}`` when the API cannot say (nothing
        is concluded about it this round)."""
        for ns in self._namespaces_of(allocation_id):
            try:
                job = self.api.get("jobs", ns, name)
            except KubeError as exc:
                log.warning("reading Job %s failed: %s", name, exc)
                return {}
            if job is not None:
                return job
        return None

    def _forget(self, live: set[str]) -> None:
        """Drop what is remembered of allocations that ended."""
        # Their objects were deleted already: nothing left for the sweep.
        self._swept |= {job_name(a) for a in (self._deleted | self._cleaned) - live}
        self._deleted &= live
        self._cleaned &= live
        self._gang_since = {k: v for k, v in self._gang_since.items() if k in live}
        self._logged = {k: v for k, v in self._logged.items() if k.split("/", 1)[0] in live}

    def _log_once(self, session: Any, allocation: Allocation, key: str, text: str) -> None:
        if self._logged.get(allocation.id + key) == text:
            return
        self._logged[allocation.id + key] = text
        master_log(session, allocation.task_id, allocation.id, text)

    def _observe_one(
        self,
        session: Any,
        allocation: Allocation,
        by_allocation: dict[str, list[dict[str, Any]]],
        fetched: dict[str, dict[str, Any] | None],
    ) -> TrialExit | None:
        name = str(allocation.batch_job_id)
        job = self._job(name)
        if job is None:
            job = fetched.get(name)
            if job == {}:
                return None  # the API could not say: look again next round
        expected = len(pod_slots(allocation.slots, self.k8s.max_slots_per_pod))
        views = [
            pod_view(p, TASK_CONTAINER) for p in by_allocation.get(label_value(allocation.id), [])
        ]
        if job is None:
            if allocation.id in self._deleted or allocation.state == "TERMINATING":
                reason = "killed: its Job was deleted"
                code = -15
            else:
                reason = (
                    f"its Job {name} is gone (deleted outside Stalwart, or its "
                    "ttlSecondsAfterFinished passed while the master was down)"
                )
                code = None
            if batchjobs.mark_exited(session, allocation.id, code, reason):
                master_log(session, allocation.task_id, allocation.id, reason)
            return None
        status = allocation_status(job, views, expected)
        if status.state == "EXITED":
            if status.image_failure:
                batchjobs.mark_exited(session, allocation.id, None, status.reason)
                master_log(session, allocation.task_id, allocation.id, str(status.reason))
                self._after_commit.append((allocation.id, expected, True))
                return end_allocation(session, allocation, None, status.reason, retry=False)
            if batchjobs.mark_exited(session, allocation.id, status.exit_code, status.reason):
                master_log(session, allocation.task_id, allocation.id, str(status.reason))
            # A failed pod of a gang: the others stop too.
            whole = status.exit_code != 0 and expected > 1
            self._after_commit.append((allocation.id, expected, whole))
            return None
        if allocation.state == "TERMINATING":
            return None
        if status.state == "RUNNING":
            self._gang_since.pop(allocation.id, None)
            if batchjobs.mark_running(session, allocation):
                pulled = pull_seconds(views)
                record_pull_time(allocation, pulled)
                text = f"all {expected} pod(s) of Job {name} are running"
                if pulled is not None:
                    text += f"; image pull and start took {pulled:.1f}s"
                master_log(session, allocation.task_id, allocation.id, text)
            return None
        running = [v for v in views if v.phase == "Running"]
        if running and expected > 1:
            now = self.state.clock.monotonic()
            since = self._gang_since.setdefault(allocation.id, now)
            if now - since >= self.k8s.gang_timeout_seconds:
                reason = (
                    f"only {len(running)} of {expected} pods ran within "
                    f"{self.k8s.gang_timeout_seconds:g}s (all-or-nothing): killed"
                )
                batchjobs.mark_exited(session, allocation.id, None, reason)
                master_log(session, allocation.task_id, allocation.id, reason)
                self._after_commit.append((allocation.id, expected, True))
                return None
        if status.state == "PULLING":
            if batchjobs.mark_pulling(session, allocation):
                image = (session.get(Container, (allocation.id, 0)) or Container()).spec or {}
                text = (
                    f"pods of Job {name} are on nodes; pulling {image.get('image') or 'the image'}"
                )
                master_log(session, allocation.task_id, allocation.id, text)
        elif status.waiting:
            self._log_once(session, allocation, "/wait", f"Job {name} waits: {status.waiting}")
        return None

    def _delete_quietly(self, allocation_id: str, pods: int) -> None:
        try:
            self._delete_objects(allocation_id, pods)
        except KubeError as exc:
            log.warning("deleting the Job of %s failed: %s", allocation_id, exc)

    # -- schedule ----------------------------------------------------------------------------

    def schedule(self) -> None:
        """Claim PENDING allocations and create their objects (see the module docstring)."""
        with self.sessions() as session:  # reads only
            pending = list(
                session.scalars(
                    select(Allocation.id)
                    .where(Allocation.state == "PENDING")
                    .order_by(Allocation.id)
                )
            )
            todo = batchjobs.unsubmitted(session, K8S_AGENT)
        for allocation_id in pending:
            with self.step() as session:
                if rows.claim(
                    session,
                    allocation_id,
                    self.k8s,
                    cluster_id=self.state.cluster_id,
                    startup_hook_of=self.state.settings.startup_hook,
                ):
                    todo.append(allocation_id)
        for allocation_id in todo:
            self._create(allocation_id)

    def _create(self, allocation_id: str) -> None:
        with self.sessions() as session:  # reads only
            allocation = session.get(Allocation, allocation_id)
            row = session.get(Container, (allocation_id, 0))
            if allocation is None or row is None or allocation.batch_job_id is not None:
                return
            request = rows.job_request(
                session,
                allocation,
                self.k8s,
                master_url=self.master_url,
                cluster_id=self.state.cluster_id,
                task_container_defaults=self._defaults(allocation.resource_pool),
            )
            token = str(row.spec.get("token") or "")
        if request is None:
            return
        try:
            objects = allocation_objects(request, token)
        except ValueError as exc:
            self._reject(allocation_id, f"the Job cannot be built: {exc}")
            return
        for body in objects:
            kind = _PLURAL[str(body["kind"])]
            try:
                self.api.create(kind, request.namespace, body)
            except AlreadyExistsError:
                continue
            except KubeError as exc:
                if exc.retryable or "exceeded quota" in str(exc):
                    self._waiting(allocation_id, f"Kubernetes cannot take the Job yet: {exc}")
                else:
                    self._reject(allocation_id, f"Kubernetes refused the Job: {exc}")
                return
        name = str(objects[-1]["metadata"]["name"])
        with self.step() as session:
            recorded = batchjobs.record_submission(session, allocation_id, name)
            allocation = session.get(Allocation, allocation_id)
            if recorded and allocation is not None:
                text = f"created Kubernetes Job {request.namespace}/{name} ({request.image})"
                master_log(session, allocation.task_id, allocation.id, text)
            session.commit()

    def _defaults(self, pool: str) -> Mapping[str, Any] | None:
        settings = self.state.settings
        return settings.pool_task_container_defaults(pool) or settings.task_container_defaults

    def _waiting(self, allocation_id: str, text: str) -> None:
        log.warning("allocation %s: %s", allocation_id, text)
        with self.step() as session:
            allocation = session.get(Allocation, allocation_id)
            if allocation is not None:
                self._log_once(session, allocation, "/create", text)
            session.commit()

    def _reject(self, allocation_id: str, message: str) -> None:
        log.warning("allocation %s: %s", allocation_id, message)
        with self.step() as session:
            batchjobs.reject(session, allocation_id, message)
            session.commit()

    # -- image pre-pull ---------------------------------------------------------------------

    @property
    def prepull_settings(self) -> PrepullSettings:
        """``resource_manager.prepull``: the DaemonSets' plan."""
        return self.k8s.prepull

    def prepull_pools(self) -> dict[str, DeviceType]:
        """The pools to pre-pull for (the default, the configured and the experiments' ones),
        each with its slot type."""
        settings = self.state.settings
        names = {"default", *self.k8s.pool_slot_types}
        names |= {str(p.get("pool_name")) for p in settings.resource_pools if p.get("pool_name")}
        with self.sessions() as session:
            names |= {e.pool for e in queued_experiment_images(session)}
        return {name: self.k8s.pool_slot_type(name) for name in sorted(names)}

    def refresh_prepull(self) -> None:
        """Create, update or delete the pre-pull DaemonSets so they match the plan."""
        prepull = self.k8s.prepull
        pools = self.prepull_pools()
        with self.sessions() as session:
            plan = plan_for(session, pools, prepull)
        ns = self.k8s.namespace
        try:
            existing, _ = self.api.list("daemonsets", ns, f"{PREPULL_LABEL},{self.selector}")
        except KubeError as exc:
            log.warning("listing the pre-pull DaemonSets failed: %s", exc)
            return
        current = {
            d["metadata"]["name"]: (d["spec"]["template"]["metadata"].get("annotations") or {}).get(
                PLAN_ANNOTATION
            )
            for d in existing
        }
        wanted: set[str] = set()
        for pool, images in plan.items():
            if not images:
                continue
            body = daemonset_manifest(
                pool,
                images,
                namespace=ns,
                pause_image=prepull.pause_image,
                node_selector=self.k8s.pool_node_selectors.get(pool),
                priority_class=prepull.priority_class,
                pull_secrets=self.k8s.image_pull_secrets,
            )
            body["metadata"]["labels"]["stalwart.dev/cluster"] = label_value(self.state.cluster_id)
            name = daemonset_name(pool)
            wanted.add(name)
            if current.get(name) == plan_hash(images):
                continue
            try:
                if name in current:
                    self.api.replace("daemonsets", ns, name, body)
                else:
                    self.api.create("daemonsets", ns, body)
            except KubeError as exc:
                log.warning("pre-pull DaemonSet %s: %s", name, exc)
            else:
                log.info("pre-pull DaemonSet %s: %d image(s)", name, len(images))
        for name in sorted(set(current) - wanted):
            try:
                self.api.delete("daemonsets", ns, name)
            except KubeError as exc:
                log.warning("deleting the stale pre-pull DaemonSet %s: %s", name, exc)
