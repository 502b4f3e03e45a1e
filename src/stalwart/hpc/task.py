"""The task launcher a batch job runs on each node: ``python -m stalwart.hpc.task``.

The master's batch script (:mod:`stalwart.hpc.slurm.script`) ``srun``\\ s this module once per
node. Contract:

- **Inputs** (environment set by the batch script): :data:`MASTER_URL_VAR` (the master as
  compute nodes reach it), ``STALWART_ALLOCATION_ID``, :data:`TOKEN_FILE_VAR` (a 0600 file under
  the job directory holding the allocation token; the token never appears in an argv, a batch
  script or ``scontrol show job``). The node's rank is ``SLURM_NODEID`` (0 on one node); in
  a Kubernetes pod, its Job completion index ``JOB_COMPLETION_INDEX``; under PBS's ``pbsdsh``,
  ``PBS_NODENUM``.
- **Start**: ``POST /api/v1/allocations/{id}/batch/start`` (allocation token) with the rank,
  the node's name and its address (:func:`node_address`: the local address of the route to
  the master, so the other nodes reach it the same way) returns the rank's
  :class:`~stalwart.agent.protocol.TaskSpec` and marks it running. With several nodes the
  master answers ``{"waiting": [ranks]}`` until every rank has called (the spec's
  ``rendezvous.json`` lists every node's address); the launcher asks again every
  :data:`RENDEZVOUS_POLL_S` for at most :data:`RENDEZVOUS_TIMEOUT_S`. The master answers no spec
  when the allocation is being killed: the launcher then exits 0 without running anything.
- **Run**: the agent's own pieces (in a container per ``container_run_type``:
  :mod:`stalwart.hpc.container_runner`): :func:`~stalwart.agent.workspace.prepare_workspace` under
  ``<job dir>/tasks/<allocation>/rank-<r>/`` (model definition fetched from the master),
  :class:`~stalwart.agent.runner.ProcessRunner`, :class:`~stalwart.agent.shipper.LogShipper`.
  GPUs: the device ids Slurm made visible (``CUDA_VISIBLE_DEVICES`` / ``ROCR_VISIBLE_DEVICES``)
  become the spec's slot ids, so the task sees exactly the job's GPUs.
- **Signals**: the task starts with SIGTERM ignored (Slurm signals every process of the step,
  not only the launcher), so Slurm's SIGTERM reaches the task only as the preemption signal.
  When the launcher gets SIGTERM or SIGINT it asks the master whether the allocation was
  already told to stop (``GET .../signals/preemption``, no wait):

  - **not yet** (Slurm preempts the job for a higher-priority partition, a time limit's
    ``--signal``, a person's ``scancel``): ``POST .../signals/pending_preemption``, so the
    task's ``should_preempt()`` long-poll answers True; it checkpoints and exits 0 (a preemption
    it acknowledged: the trial resumes from that checkpoint, without using a restart). Slurm's
    SIGKILL after ``KillWait`` (or the preemption's grace time) ends a task that is too slow.
  - **already** (the master is killing the allocation, or a pause outlived
    ``cluster.preemption_timeout``: the master cancelled the job), or the master cannot be
    reached: the task's process group gets SIGINT at once, then SIGKILL after
    :data:`KILL_GRACE_S`.
- **Interactive tasks** (a spec whose ``DET_TASK_TYPE`` is not ``TRIAL``: commands, notebooks,
  shells, TensorBoards) have nothing to checkpoint, so a stop is never a preemption for them:
  the task starts with SIGTERM at its default (Slurm's SIGTERM reaches it as it would any batch
  job's program), and the launcher's SIGTERM or SIGINT sends SIGTERM to the task's process
  group, then SIGKILL after :data:`KILL_GRACE_S`, without ``pending_preemption``. It still
  asks ``signals/preemption`` whether the master is the one stopping it, for the report below.
  Slurm signals a step's processes one ``kill`` at a time (``proctrack/linuxproc``: children
  before parents, so the task's deepest processes first and the launcher last; only
  ``proctrack/cgroup`` freezes the step around its signals). So the task may end of Slurm's
  SIGTERM before the launcher's own arrives: one that arrives after the task's exit was seen
  is still asked about, before the exit is reported (again after the last lines are shipped).
  Nor do the task's own processes get it together: a shell whose child dies of it first may
  finish its script and exit 0 before its own SIGTERM (and its ``trap``) arrives (``sleep 600
  & wait``: ``wait`` returns 0 once no child is left).
- **End**: the task's last lines are shipped (at most :data:`SHIP_TIMEOUT_S`), then the exit is
  reported (``POST .../batch/exit`` with the rank and exit code, negative for a signal), and the
  launcher exits with the task's code (128 + N for signal N), which Slurm records as the job's.
  After a SIGTERM the master did not ask for, the exit is **not** reported, except a trial's
  exit 0 (its acknowledged preemption): Slurm's record of the job (PREEMPTED, TIMEOUT,
  CANCELLED, read by the tracker) says why better than a signal number, or than an interactive
  task's exit 0 (a program that exits 0 on SIGTERM, a shell whose child died first). If the
  master cannot be told, Slurm's record still carries the code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

import httpx

from stalwart._retry import RetriesExhaustedError, RetryPolicy, send_with_retries
from stalwart.agent.context import fetch_context, task_headers
from stalwart.agent.logs import LogContext
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.shipper import LogShipper
from stalwart.agent.workspace import prepare_workspace
from stalwart.hpc.container_runner import runner_from_environ

__all__ = [
    "MASTER_URL_VAR",
    "TOKEN_FILE_NAME",
    "TOKEN_FILE_VAR",
    "LaunchError",
    "main",
    "node_address",
    "run_task",
    "visible_slot_ids",
]

MASTER_URL_VAR = "STALWART_MASTER_URL"
TOKEN_FILE_VAR = "STALWART_TOKEN_FILE"
TOKEN_FILE_NAME = "token"
"""The token file's name in the job directory (written by the master, mode 0600)."""
SHIP_TIMEOUT_S = 15.0
RENDEZVOUS_POLL_S = 0.5
"""Seconds between two ``batch/start`` calls while other nodes have not started yet."""
RENDEZVOUS_TIMEOUT_S = 600.0
"""How long a node waits for the job's other nodes (Slurm starts them together)."""
KILL_GRACE_S = 10.0
"""After the SIGINT of a task the master is killing, how long before SIGKILL."""
_HIDDEN_VARS = (TOKEN_FILE_VAR,)
START_DEADLINE_S = 60.0
"""How long a node keeps asking a master that is away (stopping, restarting) to start."""
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)

log = logging.getLogger("stalwart.hpc.task")


class LaunchError(Exception):
    """The launcher cannot run the task (missing inputs, the master refused)."""


def visible_slot_ids(spec: TaskSpec, environ: Mapping[str, str]) -> list[str]:
    """The spec's slot ids on this node: the GPUs the batch system made visible, if any."""
    var = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "ROCR_VISIBLE_DEVICES"}.get(spec.device_type)
    value = environ.get(var, "") if var else ""
    ids = [part.strip() for part in value.split(",") if part.strip()]
    return ids or list(spec.slot_ids)


def node_address(master_url: str) -> str:
    """This node's address as seen on the route to the master (no packet is sent); the host
    name's address when there is no route."""
    parts = urlsplit(master_url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 80
    try:
        family, kind, proto, _, target = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.connect(target)
            return str(probe.getsockname()[0])
    except OSError:
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"


def _start(
    client: httpx.Client, url: str, token: str, body: dict[str, object]
) -> dict[str, object]:
    """``batch/start`` until the master gives a spec or none (see the module contract)."""
    deadline = time.monotonic() + RENDEZVOUS_TIMEOUT_S
    said = False
    while True:
        answer = _post(client, url, token, body)
        if answer.status_code != 200:
            raise LaunchError(f"the master refused to start rank {body['rank']}: {answer.text}")
        data: dict[str, object] = answer.json()
        waiting = data.get("waiting")
        if data.get("spec") is not None or not waiting:
            return data
        if time.monotonic() >= deadline:
            raise LaunchError(
                f"ranks {waiting} of the job did not start within {RENDEZVOUS_TIMEOUT_S:g} s"
            )
        if not said:
            print(f"stalwart: rank {body['rank']} waiting for ranks {waiting}", flush=True)
            said = True
        time.sleep(RENDEZVOUS_POLL_S)


def _post(client: httpx.Client, url: str, token: str, body: dict[str, object]) -> httpx.Response:
    """POST while the master is away (the shared policy of :mod:`stalwart._retry`, for at most
    :data:`START_DEADLINE_S`); both calls may be repeated: ``batch/start`` answers a rank
    that started its spec again, and the first ``batch/exit`` of a rank wins."""
    policy = RetryPolicy(initial_backoff_s=0.5, deadline_s=START_DEADLINE_S)
    try:
        return send_with_retries(
            lambda _attempt: client.post(url, json=body, headers=task_headers(token)),
            method="POST",
            policy=policy,
        )
    except RetriesExhaustedError as exc:
        raise LaunchError(f"the master at {url} did not answer: {exc.problem}") from exc


def run_task(environ: Mapping[str, str]) -> int:
    """Run this node's rank of the allocation (see the module contract); its exit status."""
    master_url = environ.get(MASTER_URL_VAR, "").rstrip("/")
    allocation_id = environ.get("STALWART_ALLOCATION_ID", "")
    token_file = environ.get(TOKEN_FILE_VAR, "")
    if not (master_url and allocation_id and token_file):
        raise LaunchError(
            f"{MASTER_URL_VAR}, STALWART_ALLOCATION_ID and {TOKEN_FILE_VAR} must be set"
        )
    token = Path(token_file).read_text(encoding="utf-8").strip()
    rank = int(
        environ.get("SLURM_NODEID")
        or environ.get("SLURM_PROCID")
        or environ.get("JOB_COMPLETION_INDEX")
        or environ.get("PBS_NODENUM")
        or 0
    )
    node = socket.gethostname()
    base = f"{master_url}/api/v1/allocations/{allocation_id}/batch"
    body: dict[str, object] = {"rank": rank, "node": node, "address": node_address(master_url)}
    with httpx.Client(timeout=_TIMEOUT) as client:
        data = _start(client, f"{base}/start", token, body)
        if data.get("spec") is None:  # being killed: nothing to run
            print(f"stalwart: {data.get('message') or 'the allocation ended'}", flush=True)
            return 0
        spec = TaskSpec.model_validate(data["spec"])
        spec = spec.model_copy(update={"slot_ids": visible_slot_ids(spec, environ)})
        signals = _Signals(client, f"{master_url}/api/v1/allocations/{allocation_id}", token)
        signals.preemptible = spec.env.get("DET_TASK_TYPE", "TRIAL") == "TRIAL"
        code, reason = _run(spec, client, master_url, node, environ, signals)
        # Again after the last lines were shipped: Slurm's SIGTERM to the launcher follows its
        # SIGTERM to the task's processes, and may come after the task's exit was seen.
        if (late := signals.handle_after_exit()) is not None:
            print(f"stalwart: {late}", flush=True)
        if not signals.reports_exit(code):
            print(
                f"stalwart: the task ended with code {code} after Slurm stopped the job; "
                "leaving the verdict to Slurm's record of the job",
                flush=True,
            )
        else:
            _post(
                client,
                f"{base}/exit",
                token,
                {"rank": rank, "exit_code": code, "reason": reason},
            )
    if code is None:
        return 1
    return 128 - code if code < 0 else code


class _Signals:
    """What the launcher does with SIGTERM/SIGINT (see the module contract).

    The signal handler only sets :attr:`received`; :meth:`handle` runs in the main loop (no
    HTTP inside a signal handler) and returns whether the task must be interrupted now.
    :attr:`outside`: the stop came from Slurm, not from the master. :attr:`preemptible`: the
    task is a trial (a stop from Slurm is a preemption it checkpoints for); an interactive
    task is interrupted with :attr:`interrupt_signal` whoever stops it.
    """

    def __init__(self, client: httpx.Client, base: str, token: str) -> None:
        self.client = client
        self.base = base
        self.token = token
        self.received = threading.Event()
        self.signum = 0
        self.handled = False
        self.outside = False
        self.preemptible = True

    @property
    def interrupt_signal(self) -> signal.Signals:
        """What the task's process group gets when it must stop now: SIGINT for a trial (its
        SIGTERM is ignored), SIGTERM for an interactive task."""
        return signal.SIGINT if self.preemptible else signal.SIGTERM

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum
        self.received.set()

    def handle(self) -> tuple[bool, str]:
        """``(interrupt the task now, a line for the task's logs)``; called once per job."""
        self.handled = True
        headers = task_headers(self.token)
        try:
            answer = self.client.get(
                f"{self.base}/signals/preemption",
                params={"timeout_seconds": "0"},
                headers=headers,
                timeout=httpx.Timeout(5.0),
            )
            answer.raise_for_status()
            if answer.json().get("preempt") is True:
                return True, (
                    f"the batch job got signal {self.signum} and the master is stopping the "
                    "allocation: interrupting the task"
                )
            if not self.preemptible:
                self.outside = True
                return True, (
                    f"the batch job got signal {self.signum} from the batch system: stopping "
                    "the task"
                )
            self.client.post(
                f"{self.base}/signals/pending_preemption",
                headers=headers,
                timeout=httpx.Timeout(5.0),
            ).raise_for_status()
        except (httpx.HTTPError, ValueError) as exc:
            return True, (
                f"the batch job got signal {self.signum} and the master cannot be told "
                f"({exc}): interrupting the task"
            )
        self.outside = True
        return False, (
            f"the batch job got signal {self.signum} from Slurm: asking the task to "
            "checkpoint and exit (preemption)"
        )

    def handle_after_exit(self) -> str | None:
        """An interactive task's SIGTERM or SIGINT that was not handled before its exit was
        seen: ask the master about it as :meth:`handle` does (there is nothing left to
        interrupt), so that a stop by Slurm is not reported as the task's own exit; a line for
        the logs, None when there is nothing to ask about. Slurm signals the launcher after the
        task's processes (see the module contract), so a task that Slurm's SIGTERM ends may
        exit before the launcher's own SIGTERM arrives. A trial ignores SIGTERM: its exit is
        its own."""
        if self.handled or self.preemptible or not self.received.is_set():
            return None
        self.handle()
        return f"the batch job got signal {self.signum} as the task ended" + (
            ": Slurm stopped it" if self.outside else ""
        )

    def reports_exit(self, code: int | None) -> bool:
        """Whether the task's exit is reported to the master: not after a stop by Slurm
        (:attr:`outside`), except a trial's exit 0 (a preemption it acknowledged)."""
        return not self.outside or (self.preemptible and code == 0)


def _run(
    spec: TaskSpec,
    client: httpx.Client,
    master_url: str,
    node: str,
    environ: Mapping[str, str],
    signals: _Signals,
) -> tuple[int | None, str | None]:
    """Prepare, start and wait for the task, shipping its lines; ``(exit code, reason)``."""
    shipper = LogShipper(master_url)
    stream = shipper.open(
        LogContext(
            task_id=spec.task_id,
            allocation_id=spec.allocation_id,
            agent_id=node,
            container_id=spec.container_id,
            token=spec.token,
        )
    )
    shipper.start()
    exited = threading.Event()
    runner = runner_from_environ(environ)
    runner.on_exit = exited.set
    code: int | None = None
    reason: str | None = None
    try:
        workspace = prepare_workspace(
            spec,
            home=Path.cwd(),
            master_url=master_url,
            agent_id=node,
            fetch=lambda s: fetch_context(client, master_url, s.task_id, s.token),
            python=Path(sys.executable),
            base_env={k: v for k, v in environ.items() if k not in _HIDDEN_VARS},
        )
        # A trial inherits SIGTERM ignored (exec keeps SIG_IGN): Slurm's SIGTERM to every
        # process of the step becomes the preemption signal, sent by the launcher. An
        # interactive task gets the default (exec resets a handler): a stop is a stop.
        signal.signal(signal.SIGTERM, signal.SIG_IGN if signals.preemptible else signals.on_signal)
        try:
            handle = runner.start(spec, workspace, stream.line)
        finally:
            signal.signal(signal.SIGTERM, signals.on_signal)
    except Exception as exc:  # the task never started: say why, in its logs and its exit
        reason = f"failed to start: {exc}"
        stream.agent_line(f"container {reason}", "LOG_LEVEL_ERROR")
    else:
        signal.signal(signal.SIGINT, signals.on_signal)
        stream.agent_line(f"started on {node} (Slurm job {environ.get('SLURM_JOB_ID', '?')})")
        kill_at: float | None = None
        while (code := runner.poll(handle)) is None:
            exited.wait(0.2)
            if signals.received.is_set() and not signals.handled:
                interrupt, line = signals.handle()
                stream.agent_line(line)
                if interrupt:
                    _signal_task(handle.pid, signals.interrupt_signal)
                    kill_at = time.monotonic() + KILL_GRACE_S
            if kill_at is not None and time.monotonic() >= kill_at:
                runner.kill(handle)
                kill_at = None
        if (late := signals.handle_after_exit()) is not None:
            stream.agent_line(late)
        level = "LOG_LEVEL_INFO" if code == 0 else "LOG_LEVEL_ERROR"
        stream.agent_line(f"container exited with code {code}", level)
    shipper.release(stream)
    shipper.close(timeout=SHIP_TIMEOUT_S)
    return code, reason


def _signal_task(pid: int, signum: int) -> None:
    """Signal the task's process group (it leads its own session), if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signum)


def main() -> None:
    """Entry point of ``python -m stalwart.hpc.task``."""
    logging.basicConfig(level=logging.INFO, format="stalwart launcher: %(message)s")
    try:
        status = run_task(os.environ)
    except (LaunchError, OSError, ValueError) as exc:
        print(f"stalwart launcher: {exc}", file=sys.stderr, flush=True)
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
