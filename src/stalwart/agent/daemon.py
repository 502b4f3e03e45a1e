"""The agent's registry of containers and its reconcile step (no HTTP here).

:class:`Daemon` keeps one :class:`Container` per ``(allocation_id, rank)`` and offers three plain
methods the sync loop (:mod:`stalwart.agent.loop`) calls from one thread:

- :meth:`Daemon.refresh` polls the runner: exits, and SIGKILL once a kill's grace is over. An
  exited container is reported EXITED with its last lines (and the agent's "container exited"
  line) taken from the log shipper, so the master stores them with the exit; when the shipper
  is busy with them (a batch in flight, or more than a batch left), once they are shipped or
  ``exit_log_wait_seconds`` passed. Either way logs precede the exit at the master.
- :meth:`Daemon.build_request` is the agent's whole view as a :class:`SyncRequest`.
- :meth:`Daemon.apply` carries out a :class:`SyncResponse`: start (idempotent per key), kill
  (SIGTERM now, SIGKILL after ``kill_grace_seconds``), forget (exited containers only).

Starting is not done by that thread: :meth:`Daemon.apply` records each new container STARTING
and hands it to the daemon's **starter**, one thread that prepares workspaces and calls
:meth:`Runner.start`, in the order the master sent them. The loop thread meanwhile keeps
polling and reporting exits (a wave of starts takes ~15 ms a container; exits that happen
meanwhile must not wait for it). :meth:`Daemon.refresh` moves a container whose start is done
to RUNNING (or fails it), in the loop thread: only that thread changes a container's phase.
:meth:`Daemon.take_launched` says when started containers are news for the master (once the
starter has nothing left in hand, so that one sync reports a whole wave). A kill that finds a
container in the starter's hands waits for the start to settle: one that never started is
reported "killed before it started"; one that did is stopped at once like any other.

A queued successor (a spec with ``after``: the master placed it on the slots of a container
of that allocation here) waits in phase QUEUED, reported ``QUEUED``, while that allocation's
process runs or is being started; the moment the process is gone (:meth:`Daemon._exiting`, the
first thing it does) it goes to the starter, before the exit is even reported. When nothing of
that allocation runs here when the spec arrives, it starts at once. A kill ends it as
"killed before it started".

A container that cannot start is reported EXITED with ``exit_code`` null and an
``exit_reason``. Nothing here kills a container because the master went away.

A restarted agent does not adopt its earlier life's containers (their processes were killed
before the daemon was made: :func:`~stalwart.agent.runner.kill_leftovers`). Each one that was
started (:func:`~stalwart.agent.workspace.earlier_life`) is reported EXITED, lost, until the
master says to forget it: otherwise a container the master never heard was RUNNING (the
report was lost with the agent) would be started again from its stored spec, repeating its
run's steps under the same run id.

Images: when the runner needs one (:meth:`Runner.needs_image`, docker/podman), the container
stays STARTING while a thread of its own runs :meth:`Runner.pull_image` (a pull may take
minutes, and the starter must not wait for it); :meth:`Daemon.refresh` hands it back to the
starter once the pull is done, and every later report carries ``pull_seconds``. A kill while it
pulls ends it at once ("killed before it started"; the pull itself runs on). Each answer's
``prepull`` list goes to the :class:`~stalwart.agent.prepull.Prepuller`, when the agent has one.

The official harness (``determined_env``, local processes only): a task written for it
(:meth:`Runner.official_harness`) that no ``--python`` mapping sends elsewhere runs with the
Python of the :class:`~stalwart.agent.determined_env.DeterminedEnv`. While that environment is
first built, the container stays STARTING exactly as during a pull (a thread of its own; the
build's lines go to the task's log), and a build that fails fails the start with what to do.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import stalwart
from stalwart import handovers
from stalwart.agent.determined_env import DeterminedEnv
from stalwart.agent.logs import ContainerLog, LogContext, as_log_line
from stalwart.agent.prepull import Prepuller
from stalwart.agent.protocol import (
    ContainerStatus,
    LogLine,
    SlotInfo,
    SyncRequest,
    SyncResponse,
    TaskSpec,
)
from stalwart.agent.runner import Handle, Runner
from stalwart.agent.settings import AgentSettings
from stalwart.agent.shipper import LogShipper
from stalwart.agent.workspace import (
    FetchContext,
    Workspace,
    earlier_life,
    mapped_python,
    mark_started,
    prepare_workspace,
    read_reports,
    remove_workspace,
)
from stalwart.errors import StalwartError

__all__ = ["Container", "Daemon", "Phase"]

log = logging.getLogger(__name__)

Phase = Literal["QUEUED", "STARTING", "RUNNING", "EXITING", "EXITED"]
"""QUEUED: a queued successor (``TaskSpec.after``) waiting for its predecessor's process to
exit. EXITING: the process is gone, its last lines are still being shipped (reported
RUNNING)."""


@dataclass(eq=False)
class Container:
    """One container as the agent tracks it."""

    spec: TaskSpec
    log: ContainerLog
    phase: Phase = "STARTING"
    handle: Handle | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    kill_at: float | None = None  # when to SIGKILL (a kill is under way)
    exited_at: float = 0.0
    exit_mark: int = 0
    last_lines: list[LogLine] | None = None  # taken from the shipper, sent with the exit
    reports: list[dict[str, Any]] = field(default_factory=list)  # from its spool, ditto
    # While STARTING: the starter's work on it, or (runners that need an image, the official
    # harness's first build) a thread of its own that sets ``pulled`` when done.
    job: Future[_Outcome] | None = None
    workspace: Workspace | None = None
    pulled: threading.Event | None = None
    pull_error: str | None = None
    pull_seconds: float | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)  # killed: don't start
    kill_grace: float | None = None  # a kill that came while the starter had it

    @property
    def key(self) -> tuple[str, int]:
        return self.spec.allocation_id, self.spec.rank

    def status(self) -> ContainerStatus:
        """What the master is told (EXITING shows as RUNNING)."""
        if self.phase == "EXITED":
            return ContainerStatus(
                allocation_id=self.spec.allocation_id,
                rank=self.spec.rank,
                state="EXITED",
                pid=self.handle.pid if self.handle else None,
                exit_code=self.exit_code,
                exit_reason=self.exit_reason,
                logs=self.last_lines or [],
                reports=self.reports,
                pull_seconds=self.pull_seconds,
            )
        return ContainerStatus(
            allocation_id=self.spec.allocation_id,
            rank=self.spec.rank,
            state=self.phase if self.phase in ("QUEUED", "STARTING") else "RUNNING",
            pid=self.handle.pid if self.handle else None,
            pull_seconds=self.pull_seconds,
        )


@dataclass(frozen=True)
class _Outcome:
    """What the starter made of a container (read by the loop thread in :meth:`Daemon.refresh`).

    ``started``: ``handle`` runs. ``wait``: ``workspace`` is ready, but the image must be pulled
    (``env`` None) or the official harness's environment ``env`` built first. ``failed``:
    ``error`` says why. ``skipped``: it was killed before it started."""

    kind: Literal["started", "wait", "failed", "skipped"]
    workspace: Workspace | None = None
    handle: Handle | None = None
    env: DeterminedEnv | None = None
    error: Exception | None = None


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Daemon:
    """The registry and the reconcile step (see the module docstring). Not thread-safe: one
    thread calls :meth:`refresh`, :meth:`build_request`, :meth:`apply`, :meth:`take_launched`
    and :meth:`shutdown`; the starter thread only reads containers."""

    def __init__(
        self,
        settings: AgentSettings,
        slots: list[SlotInfo],
        *,
        runner: Runner,
        shipper: LogShipper,
        fetch: FetchContext,
        base_env: Mapping[str, str],
        python: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        prepuller: Prepuller | None = None,
        determined_env: DeterminedEnv | None = None,
    ) -> None:
        self.settings = settings
        self.slots = slots
        self.runner = runner
        self.shipper = shipper
        self.fetch = fetch
        self.base_env = dict(base_env)
        self.python = python or Path(sys.executable)
        self.clock = clock
        self.prepuller = prepuller
        self.determined_env = determined_env
        self.containers: dict[tuple[str, int], Container] = {}
        self._launched = False
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="starter")
        lost = f"lost: agent {settings.agent_id} restarted while it ran (its process was killed)"
        self.earlier: dict[tuple[str, int], ContainerStatus] = {
            key: ContainerStatus(
                allocation_id=key[0], rank=key[1], state="EXITED", exit_reason=lost
            )
            for key in earlier_life(settings.home)
        }
        """The earlier life's started containers, reported exited until forgotten."""

    # --- the view ------------------------------------------------------------------------------

    def build_request(self, wait_seconds: float) -> SyncRequest:
        """The agent's whole view (slots and every known container, sorted by key)."""
        return SyncRequest(
            version=stalwart.__version__,
            resource_pool=self.settings.resource_pool,
            addresses=list(self.settings.addresses),
            slots=list(self.slots),
            containers=[
                self.containers[key].status() if key in self.containers else self.earlier[key]
                for key in sorted(self.containers.keys() | self.earlier.keys())
            ],
            wait_seconds=wait_seconds,
        )

    def refresh(self) -> bool:
        """Poll the runner; True when a reported state changed (an exit became EXITED).

        Containers whose start is done become RUNNING here (see :meth:`take_launched`)."""
        changed = False
        for container in self.containers.values():
            if container.phase == "STARTING":
                self._advance(container)
        now = self.clock()
        for container in self.containers.values():
            if container.phase == "RUNNING" and container.handle is not None:
                code = self.runner.poll(container.handle)
                if code is None:
                    if container.kill_at is not None and now >= container.kill_at:
                        container.log.agent_line(
                            "container did not stop after SIGTERM; sending SIGKILL",
                            "LOG_LEVEL_WARNING",
                        )
                        self.runner.kill(container.handle)
                        container.kill_at = None
                    continue
                container.exit_code = code
                if code < 0 or container.kill_at is not None:
                    container.exit_reason = _describe_exit(code)
                self._exiting(container, f"container {_describe_exit(code)}")
            if container.phase == "EXITING" and (
                self._take_last_lines(container)
                or container.log.flushed(container.exit_mark)
                or now - container.exited_at >= self.settings.exit_log_wait_seconds
            ):
                container.phase = "EXITED"
                handovers.mark("agent.exit_ready", [container.spec.allocation_id])
                changed = True
        return changed

    def take_launched(self) -> bool:
        """Whether containers became RUNNING since the last call that said so, now that the
        starter has none left in hand: news for the master, though no exit."""
        if not self._launched or any(c.job is not None for c in self.containers.values()):
            return False
        self._launched = False
        return True

    def _read_reports(self, container: Container) -> None:
        """Take the reports the task's harness left in its spool, for its exit report (its
        process is gone: the files are whole); what cannot be read is said in the task's log,
        before its last lines are taken."""
        if container.workspace is None:
            return
        container.reports, problems = read_reports(container.workspace.run_dir)
        for problem in problems:
            container.log.agent_line(problem, "LOG_LEVEL_WARNING")

    def _take_last_lines(self, container: Container) -> bool:
        """Take the container's unshipped lines for its exit report; whether that worked."""
        entries = container.log.hand_over(self.settings.log_batch_lines)
        if entries is None:  # the shipper is busy with them: let it finish
            self.shipper.kick()
            return False
        container.last_lines = [as_log_line(entry) for entry in entries]
        return True

    def _exiting(self, container: Container, line: str) -> None:
        handovers.mark("agent.exit", [container.spec.allocation_id])
        container.phase = "EXITING"
        self._start_successors(container.spec.allocation_id)
        self._read_reports(container)
        container.kill_at = None
        container.exited_at = self.clock()
        container.log.agent_line(
            line, "LOG_LEVEL_INFO" if container.exit_code == 0 else "LOG_LEVEL_ERROR"
        )
        container.exit_mark = container.log.mark()
        log.info("%s/%d: %s", container.spec.allocation_id, container.spec.rank, line)

    # --- applying the master's answer -----------------------------------------------------------

    def apply(self, response: SyncResponse) -> bool:
        """Carry out a response; True when it started anything (the master must hear of it;
        a kill is heard of with the exit, and a forget needs no answer)."""
        if self.prepuller is not None:
            self.prepuller.offer(response.prepull)
        for allocation_id in response.kill:
            self._kill(allocation_id, response.kill_grace_seconds)
        started = False
        for spec in response.start:  # before forgetting: removing a workspace takes a while
            ident = (spec.allocation_id, spec.rank)
            if ident not in self.containers and ident not in self.earlier:
                self._start(spec)
                started = True
        for name in response.forget:
            self._forget(name)
        return started

    def _start(self, spec: TaskSpec) -> None:
        handovers.mark("agent.start_received", [spec.allocation_id])
        stream = self.shipper.open(
            LogContext(
                task_id=spec.task_id,
                allocation_id=spec.allocation_id,
                agent_id=self.settings.agent_id,
                container_id=spec.container_id,
                token=spec.token,
            )
        )
        container = Container(spec=spec, log=stream)
        queued = spec.after is not None and self._runs(spec.after)
        self.containers[container.key] = container
        if queued:
            container.phase = "QUEUED"  # started by _exiting, the moment its predecessor exits
            return
        self._hand_to_starter(container, self._prepare, container)

    def _runs(self, allocation_id: str) -> bool:
        """Whether a process of ``allocation_id`` runs here, or is being started."""
        return any(
            c.spec.allocation_id == allocation_id and c.phase in ("STARTING", "RUNNING")
            for c in self.containers.values()
        )

    def _start_successors(self, allocation_id: str) -> None:
        """Start the queued successors of ``allocation_id`` now that its process is gone (the
        master passes its slots to them when it records the exit)."""
        if self._runs(allocation_id):
            return
        for container in self.containers.values():
            if container.phase == "QUEUED" and container.spec.after == allocation_id:
                container.phase = "STARTING"
                self._hand_to_starter(container, self._prepare, container)

    def _hand_to_starter(
        self, container: Container, work: Callable[..., _Outcome], *args: object
    ) -> None:
        """Run ``work(*args)`` in the starter thread; :meth:`refresh` settles its outcome."""
        try:
            container.job = self._starter.submit(work, *args)
        except RuntimeError:  # shut down: the agent is stopping
            container.job = None
            container.cancelled.set()
            self._kill_unstarted(container)
            return
        container.job.add_done_callback(self._wake)

    def _wake(self, _job: object = None) -> None:
        """Tell the loop there is news to look at (any thread; never blocks)."""
        hint = self.runner.on_exit
        if hint is not None:
            hint()

    # --- the starter thread (reads a container; never changes its phase) ----------------------

    def _prepare(self, container: Container) -> _Outcome:
        """Prepare the workspace and, unless an image or the harness must come first, start."""
        if container.cancelled.is_set():
            return _Outcome("skipped")
        spec = container.spec
        handovers.mark("agent.prepare", [spec.allocation_id])
        env: DeterminedEnv | None = None
        try:
            mapped = mapped_python(spec.image, self.settings.pythons)
            workspace = prepare_workspace(
                spec,
                home=self.settings.home,
                master_url=self.settings.master_url,
                agent_id=self.settings.agent_id,
                fetch=self.fetch,
                python=mapped or self.python,
                base_env=self.base_env,
            )
            needs_image = self.runner.needs_image(spec)
            if (
                self.determined_env is not None
                and mapped is None
                and self.runner.official_harness(spec, workspace)
            ):
                ready = self.determined_env.ready()
                if ready is not None:
                    workspace = workspace.with_python(ready)
                else:
                    env = self.determined_env
        except Exception as exc:  # sorted out by _start_error
            return _Outcome("failed", error=exc)
        if needs_image or env is not None:
            return _Outcome("wait", workspace=workspace, env=env)
        return self._launch(container, workspace)

    def _launch(self, container: Container, workspace: Workspace) -> _Outcome:
        if container.cancelled.is_set():
            return _Outcome("skipped", workspace=workspace)
        try:
            mark_started(workspace.root)
            handovers.mark("agent.spawn", [container.spec.allocation_id])
            handle = self.runner.start(container.spec, workspace, container.log.line)
            handovers.mark("agent.spawned", [container.spec.allocation_id])
        except Exception as exc:  # sorted out by _start_error
            return _Outcome("failed", workspace=workspace, error=exc)
        return _Outcome("started", workspace=workspace, handle=handle)

    # --- settling starts (the loop thread) ------------------------------------------------------

    def _advance(self, container: Container) -> None:
        """Move a STARTING container on once the starter or its pull thread is done."""
        job = container.job
        if job is not None:
            if not job.done():
                return
            container.job = None
            try:
                outcome = job.result()
            except CancelledError:  # the starter was shut down before it got to it
                outcome = _Outcome("skipped")
            self._settle(container, outcome)
        elif container.pulled is not None and container.pulled.is_set():
            container.pulled = None
            if container.pull_error is not None:
                self._start_failed(container, container.pull_error)
            elif container.workspace is not None:
                self._hand_to_starter(container, self._launch, container, container.workspace)

    def _settle(self, container: Container, outcome: _Outcome) -> None:
        spec = container.spec
        container.workspace = outcome.workspace
        if outcome.kind == "skipped":
            self._kill_unstarted(container)
        elif outcome.kind == "failed":
            assert outcome.error is not None
            self._start_error(container, outcome.error)
        elif outcome.kind == "wait":
            if container.cancelled.is_set():
                self._kill_unstarted(container)
                return
            env = outcome.env
            container.pulled = threading.Event()
            threading.Thread(
                target=self._pull if env is None else self._prepare_env,
                args=(container,) if env is None else (container, env),
                name=f"{'pull' if env is None else 'harness'} {spec.allocation_id}/{spec.rank}",
                daemon=True,
            ).start()
        else:
            assert outcome.handle is not None
            container.handle = outcome.handle
            container.phase = "RUNNING"
            self._launched = True
            log.info(
                "started %s/%d (pid %d): %s",
                spec.allocation_id,
                spec.rank,
                outcome.handle.pid,
                " ".join(spec.argv),
            )
            if container.kill_grace is not None:  # killed while it was being started
                self._terminate(container, container.kill_grace)

    def _prepare_env(self, container: Container, env: DeterminedEnv) -> None:
        """The thread that builds the official harness's environment for ``container`` (like
        :meth:`_pull`: :meth:`refresh` then starts the container with it, or fails it)."""
        spec = container.spec
        try:
            python = env.ensure(container.log.agent_line)
            assert container.workspace is not None
            container.workspace = container.workspace.with_python(python)
        except (StalwartError, OSError) as exc:
            container.pull_error = str(exc)
        except Exception as exc:  # a bug must not take the agent down with it
            log.exception("preparing the harness of %s/%d failed", spec.allocation_id, spec.rank)
            container.pull_error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            assert container.pulled is not None
            container.pulled.set()
            self._wake()

    def _pull(self, container: Container) -> None:
        """The pull thread of one container: :meth:`Runner.pull_image`, then a hint to the
        loop; :meth:`refresh` starts the container (or fails it)."""
        spec = container.spec
        try:
            container.pull_seconds = self.runner.pull_image(spec, container.log.line)
        except (StalwartError, OSError) as exc:
            container.pull_error = str(exc)
        except Exception as exc:  # a bug must not take the agent down with it
            log.exception("pulling the image of %s/%d failed", spec.allocation_id, spec.rank)
            container.pull_error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            assert container.pulled is not None
            container.pulled.set()
            self._wake()

    def _start_error(self, container: Container, exc: Exception) -> None:
        """Fail a container whose start raised ``exc``."""
        if isinstance(exc, (StalwartError, OSError)):
            self._start_failed(container, str(exc))
            return
        # A bug must not take the agent down with it.
        spec = container.spec
        log.error("starting %s/%d failed", spec.allocation_id, spec.rank, exc_info=exc)
        self._start_failed(container, f"internal error: {type(exc).__name__}: {exc}")

    def _start_failed(self, container: Container, reason: str) -> None:
        container.exit_reason = f"failed to start: {reason}"
        self._exiting(container, f"container {container.exit_reason}")

    def _kill(self, allocation_id: str, grace: float) -> None:
        for container in self.containers.values():
            if container.spec.allocation_id == allocation_id:
                self._stop(container, grace)

    def _stop(self, container: Container, grace: float) -> None:
        """Stop one container: SIGTERM, SIGKILL after ``grace``; one not started yet is ended
        now, unless the starter has it (then once its start settles, see :meth:`_settle`)."""
        if container.phase == "QUEUED":
            self._kill_unstarted(container)
            return
        if container.phase == "STARTING":
            self._advance(container)  # a start that is done is settled first
        if container.phase == "STARTING":
            container.cancelled.set()
            if container.job is None:  # waiting for its image or harness: the pull runs on
                self._kill_unstarted(container)
            elif container.kill_grace is None:
                container.kill_grace = grace
        elif container.phase == "RUNNING":
            self._terminate(container, grace)

    def _terminate(self, container: Container, grace: float) -> None:
        if container.handle is None or container.kill_at is not None:
            return
        container.log.agent_line(f"stopping container: SIGTERM, SIGKILL after {grace:g}s")
        container.kill_at = self.clock() + grace
        self.runner.terminate(container.handle)

    def _kill_unstarted(self, container: Container) -> None:
        """End a container that was never started (a pull or harness build runs on)."""
        container.exit_reason = "killed before it started"
        waited = container.pulled is not None
        self._exiting(
            container,
            "container killed while its image was being pulled"
            if waited
            else "container killed before it started",
        )

    def _forget(self, key: str) -> None:
        allocation_id, _, rank = key.rpartition("/")
        wanted = (allocation_id, int(rank) if rank.isdigit() else -1)
        if self.earlier.pop(wanted, None) is not None:
            remove_workspace(self.settings.home, *wanted)
            return
        container = self.containers.get(wanted)
        if container is None:
            return
        if container.phase != "EXITED":
            log.warning("the master asked to forget %s, which has not exited; kept", key)
            return
        del self.containers[container.key]
        self.shipper.release(container.log)
        remove_workspace(self.settings.home, allocation_id, container.spec.rank)

    # --- stopping -------------------------------------------------------------------------------

    def shutdown(self, *, kill: bool, grace: float, poll_interval: float = 0.1) -> None:
        """Stop the agent's side: with ``kill``, SIGTERM every running container, SIGKILL what
        is left after ``grace`` seconds and wait (briefly) for the exits; else leave them."""
        starting = [c for c in self.containers.values() if c.phase == "STARTING"]
        for container in starting:
            container.cancelled.set()  # the starter starts nothing more
        self._starter.shutdown(wait=False, cancel_futures=True)
        if not kill:
            running = sum(c.phase == "RUNNING" for c in self.containers.values())
            if running:
                log.info("leaving %d container(s) running", running)
            if starting:
                log.info("dropping %d container(s) not started yet", len(starting))
            return
        deadline = self.clock() + grace
        for container in self.containers.values():
            self._stop(container, grace)
            if container.kill_at is not None:  # an earlier kill's longer grace ends now too
                container.kill_at = min(container.kill_at, deadline)
        give_up = deadline + self.settings.exit_log_wait_seconds + 1.0
        while self.clock() < give_up:
            self.refresh()
            if all(c.phase == "EXITED" for c in self.containers.values()):
                return
            time.sleep(poll_interval)
