"""The sync loop: long-polls ``POST /api/v1/agents/{id}/sync`` and drives the :class:`Daemon`.

One asyncio loop (:meth:`AgentLoop.run`) does, every ``TICK_S`` or as soon as a container's
process exits: refresh the containers; start a sync when none is in flight and it is due;
cancel an in-flight long-poll when a container changed state, so the change is reported at
once (the protocol is stateless: a cancelled answer is simply asked for again). Every sync may
be held by the master (it records the view first). Containers are started by the daemon's
starter thread (which also downloads model definitions), so the loop keeps reporting exits
while a wave of starts is under way; started containers are reported once the wave is done
(:meth:`~stalwart.agent.daemon.Daemon.take_launched`). Applying an answer (kills, forgetting,
which removes workspaces) runs in a worker thread so the loop stays responsive to stop
requests.

Failures:

- master unreachable (transport errors, 5xx, an unreadable answer): containers keep running;
  the loop retries with the shared backoff of :mod:`stalwart._retry` (0.1 s doubling, at most
  ``max_backoff_seconds`` apart, at least a 502/503/504's ``Retry-After``: a stopping master
  says when to come back), logs once per outage, and the first sync after it reports
  everything (reattach). Unlike a single request, the daemon never gives up, and it rides out
  every 5xx (a master bug must not stop the agent);
- 401: UnauthenticatedError (a refused agent token). When the agent presented its own token
  and has an enrollment token, it enrolls again with that one (once: see
  :mod:`stalwart.agent.credentials`); otherwise fatal, as is a 403 (ForbiddenError);
- other 4xx: FailedPreconditionError with the master's message, fatal.

Enrollment: the agent presents its own token (``<home>/agent_token``) or, without one, the
cluster's enrollment token. An answer carrying ``agent_token`` (the master enrolled the agent)
carries nothing else: the token is stored, and the agent syncs again at once with it; that
sync, not the enrolling one, is the agent's first (it registers the agent and marks it ready).

:meth:`AgentLoop.stop` (any thread, e.g. a signal handler) ends :meth:`AgentLoop.run`, which
then leaves the containers running unless ``kill_on_exit``. ``<home>/ready`` exists from the
first successful sync until :meth:`AgentLoop.run` returns (launchers wait for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from stalwart import handovers
from stalwart._retry import RetryPolicy, describe, retry_after, retryable_response
from stalwart.agent.containers import ContainerRunner
from stalwart.agent.context import fetch_context
from stalwart.agent.credentials import AgentCredential
from stalwart.agent.daemon import Daemon
from stalwart.agent.determined_env import DeterminedEnv, agent_has_determined
from stalwart.agent.identity import IdentityError, TaskIdentity, resolve_task_user
from stalwart.agent.images import EngineImages
from stalwart.agent.isolation import probe
from stalwart.agent.logs import SecretMask
from stalwart.agent.prepull import Prepuller
from stalwart.agent.protocol import (
    AGENT_TOKEN_HEADER,
    SlotInfo,
    SyncRequest,
    SyncResponse,
    TaskSpec,
)
from stalwart.agent.runner import ProcessRunner, Runner, kill_leftovers
from stalwart.agent.settings import AgentSettings
from stalwart.agent.shipper import LogShipper
from stalwart.agent.warm import WarmStarts
from stalwart.errors import FailedPreconditionError, ForbiddenError, UnauthenticatedError

__all__ = ["TICK_S", "AgentLoop", "MasterUnavailableError", "create_agent", "post_sync"]

log = logging.getLogger(__name__)

TICK_S = 0.02
_CONTEXT_CACHE = 8
_CONTEXT_CACHE_BYTES = 256 * 1024 * 1024
"""Model definitions kept per agent: the most recently used experiments', within both caps."""
FAST_TICK_S = 0.01


class MasterUnavailableError(Exception):
    """The master cannot be reached right now; try again later (not before ``retry_after``
    seconds when the master said so)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _message(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("message") or resp.text)[:300]
    except (ValueError, AttributeError):
        return resp.text[:300]


async def post_sync(
    client: httpx.AsyncClient,
    settings: AgentSettings,
    request: SyncRequest,
    *,
    token: str | None = None,
) -> SyncResponse:
    """One sync round trip presenting ``token`` (default: ``settings.token``, the enrollment
    token); see the module docstring for the errors."""
    url = f"{settings.master_url}/api/v1/agents/{quote(settings.agent_id, safe='')}/sync"
    timeout = httpx.Timeout(request.wait_seconds + 15.0, connect=5.0)
    presented = settings.token if token is None else token
    if handovers.ON:
        exited = [c.allocation_id for c in request.containers if c.state == "EXITED"]
        handovers.mark("agent.sync_sent", exited)
    try:
        resp = await client.post(
            url,
            content=request.model_dump_json(),
            headers={AGENT_TOKEN_HEADER: presented, "Content-Type": "application/json"},
            timeout=timeout,
        )
    except httpx.TransportError as exc:
        raise MasterUnavailableError(f"{type(exc).__name__}: {exc}") from exc
    if retryable_response(resp, "POST") or resp.status_code >= 500:
        raise MasterUnavailableError(describe(resp), retry_after(resp))
    if resp.status_code in (401, 403):
        error = UnauthenticatedError if resp.status_code == 401 else ForbiddenError
        raise error(
            f"the master at {settings.master_url} refused the agent token "
            f"(HTTP {resp.status_code}: {_message(resp)})",
            hint="a new agent enrolls with the master's agent token (<master home>/"
            "agent_token) given with --token, STALWART_AGENT_TOKEN or --token-file; an "
            "enrolled one presents its own (<agent home>/agent_token)",
        )
    if resp.status_code != 200:
        raise FailedPreconditionError(
            f"the master refused agent {settings.agent_id!r}: HTTP {resp.status_code}: "
            f"{_message(resp)}"
        )
    try:
        return SyncResponse.model_validate_json(resp.content)
    except ValidationError as exc:
        raise MasterUnavailableError(f"unreadable sync answer: {exc}") from exc


class AgentLoop:
    """Runs a :class:`Daemon` against the master until stopped (see the module docstring)."""

    def __init__(self, daemon: Daemon, *, on_close: Sequence[Callable[[], None]] = ()) -> None:
        self.daemon = daemon
        self.settings = daemon.settings
        self.credential = AgentCredential.load(self.settings.home, self.settings.token)
        """The token presented (the agent's own, or the enrollment token)."""
        daemon.shipper.mask.add(self.credential.token)  # never shipped in a task's line
        self._stop_requested = threading.Event()
        self._on_close = list(on_close)
        self.syncs = 0  # successful round trips (for tests and logs)
        # The loop's state between steps.
        self._dirty = True  # something to report: the next sync must not long-poll
        self._due = 0.0  # monotonic time of the next sync
        self._failures = 0  # failed syncs in a row
        most = self.settings.max_backoff_seconds
        self._retry = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=most, max_retry_after_s=most)
        self._outage: float | None = None  # when the current outage began
        self._inflight_wait = 0.0
        self._exits = True  # exits (or, at first, the registration) not yet sent
        self._news_inflight = False  # the sync in flight carries them
        self._reported = 0  # containers in the request in flight
        self._woken = asyncio.Event()  # set when a container's process exits (made in _run)

    def stop(self) -> None:
        """Ask :meth:`run` to return within a tick (thread-safe, signal-safe, idempotent)."""
        self._stop_requested.set()

    def run(self) -> None:
        """Sync until :meth:`stop`; then shut down (kill only with ``kill_on_exit``).

        Raises the fatal errors of :func:`post_sync`; containers are left as on a stop.
        """
        self.ready_file.unlink(missing_ok=True)
        self.daemon.shipper.start()
        try:
            asyncio.run(self._run())
        finally:
            self.ready_file.unlink(missing_ok=True)
            self.daemon.shutdown(
                kill=self.settings.kill_on_exit, grace=self.settings.kill_grace_seconds
            )
            self.daemon.shipper.close(timeout=self.settings.shutdown_log_timeout_seconds)
            for close in self._on_close:
                close()

    async def _run(self) -> None:
        woken = self._woken = asyncio.Event()
        loop = asyncio.get_running_loop()

        def hint() -> None:  # from a runner thread: a container's process exited
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
                loop.call_soon_threadsafe(woken.set)

        self.daemon.runner.on_exit = hint
        async with httpx.AsyncClient() as client:
            inflight: asyncio.Task[SyncResponse] | None = None
            try:
                while not self._stop_requested.is_set():
                    inflight = await self._step(client, inflight)
            finally:
                if inflight is not None:
                    inflight.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await inflight

    async def _step(
        self, client: httpx.AsyncClient, inflight: asyncio.Task[SyncResponse] | None
    ) -> asyncio.Task[SyncResponse] | None:
        """One tick; returns the sync in flight afterwards."""
        daemon, settings = self.daemon, self.settings
        self._woken.clear()
        if daemon.refresh():
            self._dirty = self._exits = True
            if self._outage is None:
                self._due = 0.0
        if daemon.take_launched():  # the starter is done with a wave: report it RUNNING now
            self._dirty = True
            if self._outage is None:
                self._due = 0.0
        if inflight is not None and self._dirty and not self._news_inflight:
            inflight.cancel()  # report the change now rather than after the long-poll
            with contextlib.suppress(
                asyncio.CancelledError, MasterUnavailableError, UnauthenticatedError
            ):
                await inflight  # a refusal it ended with comes back with the next sync
            inflight = None
        now = time.monotonic()
        if inflight is None:
            if now < self._due:
                await self._wait(None, min(TICK_S, self._due - now))
                return None
            # Every sync may be held (the master records the view first). One that reports
            # exits is answered once the master's round on them has placed what the freed
            # slots can take: a short wait, so it is not cancelled for later news.
            self._inflight_wait = settings.idle_wait_seconds
            self._news_inflight, self._exits = self._exits, False
            self._dirty = False
            request = daemon.build_request(self._inflight_wait)
            self._reported = len(request.containers)
            token = self.credential.token
            inflight = asyncio.create_task(post_sync(client, settings, request, token=token))
        if not await self._wait(inflight, self._tick()):
            return inflight
        try:
            response = inflight.result()
        except MasterUnavailableError as exc:
            self._unreachable(str(exc), exc.retry_after)
            return None
        except UnauthenticatedError:
            if not self.credential.refused():
                raise
            self._sync_again()  # with the enrollment token
            return None
        if self._outage is not None:
            log.info(
                "master back after %.0fs; reported %d container(s)",
                time.monotonic() - self._outage,
                self._reported,
            )
            self._outage = None
        self._failures = 0
        if response.agent_token is not None:  # enrolled: the answer carries nothing else
            await asyncio.to_thread(self.credential.adopt, response.agent_token)
            self.daemon.shipper.mask.add(response.agent_token)
            self._sync_again()  # with the agent's own token
            return None
        self.syncs += 1
        if self.syncs == 1:
            self._mark_ready()
        if await asyncio.to_thread(daemon.apply, response):
            self._dirty, self._due = True, time.monotonic() + response.sync_interval_seconds
        return None

    async def _wait(self, inflight: asyncio.Task[SyncResponse] | None, timeout: float) -> bool:
        """Wait up to ``timeout`` for ``inflight`` to finish or a container to exit; whether
        ``inflight`` is done."""
        woken = asyncio.ensure_future(self._woken.wait())
        waiting: set[asyncio.Future[Any]] = {woken}
        if inflight is not None:
            waiting.add(inflight)
        try:
            await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
        return inflight is not None and inflight.done()

    def _tick(self) -> float:
        """``TICK_S``, or a fast tick while an exit waits for its last lines to ship."""
        exiting = any(c.phase == "EXITING" for c in self.daemon.containers.values())
        return FAST_TICK_S if exiting else TICK_S

    @property
    def ready_file(self) -> Path:
        """``<home>/ready``: exists from the first successful sync until the agent stops."""
        return self.settings.home / "ready"

    def _mark_ready(self) -> None:
        self.settings.home.mkdir(parents=True, exist_ok=True)
        self.ready_file.write_text(f"{self.settings.agent_id}\n", encoding="utf-8")
        log.info("agent %s synced with %s", self.settings.agent_id, self.settings.master_url)

    def _sync_again(self) -> None:
        """Sync again at once: the last sync recorded nothing (it enrolled, or was refused)."""
        self._due, self._dirty = 0.0, True
        self._exits = self._exits or self._news_inflight

    def _unreachable(self, why: str, after: float | None = None) -> None:
        if self._outage is None:
            self._outage = time.monotonic()
            log.warning(
                "master %s unreachable (%s); containers keep running, retrying",
                self.settings.master_url,
                why,
            )
        wait = self._retry.wait(self._failures, after)
        self._failures += 1
        self._due, self._dirty = time.monotonic() + wait, True
        self._exits = self._exits or self._news_inflight  # they may not have arrived


def _task_user(settings: AgentSettings) -> TaskIdentity | None:
    """Who runs non-admins' tasks (see :mod:`stalwart.agent.identity`), said once in the log.

    Raises FailedPreconditionError when a root agent's ``task_user`` does not exist here.
    """
    if os.geteuid() != 0:
        log.warning(
            "the agent runs as uid %d, not root: every task runs as this user and can read "
            "what it can; run the agent as root to run non-admins' tasks as %r",
            os.geteuid(),
            settings.task_user,
        )
        return None
    try:
        found = resolve_task_user(settings.task_user)
    except IdentityError as exc:
        raise FailedPreconditionError(f"task_user: {exc}") from None
    log.info(
        "tasks of non-admins run as %s (uid %d, gid %d) unless linked to an agent user",
        found.name,
        found.uid,
        found.gid,
    )
    return found


def _process_runner(settings: AgentSettings) -> ProcessRunner:
    """A ProcessRunner with mount namespaces as ``settings.mount_namespaces`` and the node allow,
    running non-admins' tasks as ``settings.task_user`` when the agent is root.

    Raises FailedPreconditionError under ``require`` when the node does not allow them.
    """
    task_user = _task_user(settings)
    warm = WarmStarts() if settings.warm_start else None
    if settings.mount_namespaces == "off":
        return ProcessRunner(
            no_namespace_reason="mount_namespaces is off in the agent's settings",
            task_user=task_user,
            warm=warm,
        )
    found = probe(settings.home / "tmp")
    if not isinstance(found, str):
        every = settings.mount_namespaces == "require"
        log.info(
            "%s run in private mount namespaces (/run/determined, /determined_shared_fs)",
            "tasks" if every else "tasks written for the official harness",
        )
        return ProcessRunner(found, every_task=every, task_user=task_user, warm=warm)
    if settings.mount_namespaces == "require":
        raise FailedPreconditionError(f"no private mount namespaces for tasks: {found}")
    log.warning(
        "tasks run without private mount namespaces (%s): tasks using the official `determined` "
        "harness run one at a time, with /run/determined and /determined_shared_fs linked to "
        "their files; run the agent as root or allow unprivileged user namespaces to run them "
        "side by side",
        found,
    )
    return ProcessRunner(no_namespace_reason=found, task_user=task_user, warm=warm)


def create_agent(
    settings: AgentSettings, slots: list[SlotInfo], base_env: Mapping[str, str] | None = None
) -> AgentLoop:
    """Wire the pieces for ``settings``: runner, log shipper, context download, daemon (and,
    with a container engine, the images it shares with the pre-puller)."""
    runner: Runner
    prepuller: Prepuller | None = None
    determined_env: DeterminedEnv | None = None
    if settings.container_runtime == "none":
        runner = _process_runner(settings)
        if settings.determined_env is not None and not agent_has_determined():
            determined_env = DeterminedEnv(settings.determined_env)
        for name in kill_leftovers(settings.home):
            log.warning("killed task %s, left running by an earlier life of this agent", name)
    else:
        images = EngineImages(settings.container_runtime, pull_timeout=settings.image_pull_timeout)
        runner = ContainerRunner(
            settings.container_runtime,
            master_url=settings.master_url,
            agent_id=settings.agent_id,
            images=images,
        )
        for name in runner.kill_leftovers():
            log.warning("killed container %s, left running by an earlier life of this agent", name)
        prepuller = Prepuller(images)
    shipper = LogShipper(
        settings.master_url,
        batch_lines=settings.log_batch_lines,
        flush_seconds=settings.log_flush_seconds,
        buffer_lines=settings.log_buffer_lines,
        mask=SecretMask(settings.token),
    )
    http = httpx.Client()
    contexts: OrderedDict[str, bytes] = OrderedDict()
    lock = threading.Lock()

    def fetch(spec: TaskSpec) -> bytes:
        """The model definition, downloaded once per experiment (trial tasks are
        ``<experimentId>.<requestId>``; an experiment's model definition never changes)."""
        experiment = spec.task_id.split(".", 1)[0] if "." in spec.task_id else None
        with lock:
            if experiment is not None and experiment in contexts:
                contexts.move_to_end(experiment)
                return contexts[experiment]
        archive = fetch_context(http, settings.master_url, spec.task_id, spec.token)
        if experiment is not None:
            with lock:
                contexts[experiment] = archive
                while len(contexts) > 1 and (
                    len(contexts) > _CONTEXT_CACHE
                    or sum(map(len, contexts.values())) > _CONTEXT_CACHE_BYTES
                ):
                    contexts.popitem(last=False)
        return archive

    daemon = Daemon(
        settings,
        slots,
        runner=runner,
        shipper=shipper,
        fetch=fetch,
        base_env=dict(os.environ if base_env is None else base_env),
        prepuller=prepuller,
        determined_env=determined_env,
    )
    on_close = [http.close] if prepuller is None else [prepuller.close, http.close]
    if isinstance(runner, ProcessRunner) and runner.warm is not None:
        runner.warm.prepare(daemon.python, daemon.base_env)
        on_close.append(runner.warm.close)  # after the daemon's shutdown saw the exits
    return AgentLoop(daemon, on_close=on_close)
