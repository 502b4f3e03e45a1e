"""The task launcher a batch job runs on each node: ``python -m stalwart.hpc.task``.

The master's batch script (:mod:`stalwart.hpc.slurm.script`) ``srun``\\ s this module once per
node. Contract:

- **Inputs** (environment set by the batch script): :data:`MASTER_URL_VAR` (the master as
  compute nodes reach it), ``STALWART_ALLOCATION_ID``, :data:`TOKEN_FILE_VAR` (a 0600 file under
  the job directory holding the allocation token; the token never appears in an argv, a batch
  script or ``scontrol show job``). The node's rank is ``SLURM_NODEID`` (0 on one node).
- **Start**: ``POST /api/v1/allocations/{id}/batch/start`` (allocation token) returns the rank's
  :class:`~stalwart.agent.protocol.TaskSpec` and marks it running. The master answers no spec
  when the allocation is being killed: the launcher then exits 0 without running anything.
- **Run**: the agent's own pieces: :func:`~stalwart.agent.workspace.prepare_workspace` under
  ``<job dir>/tasks/<allocation>/rank-<r>/`` (model definition fetched from the master),
  :class:`~stalwart.agent.runner.ProcessRunner`, :class:`~stalwart.agent.shipper.LogShipper`.
  GPUs: the device ids Slurm made visible (``CUDA_VISIBLE_DEVICES`` / ``ROCR_VISIBLE_DEVICES``)
  become the spec's slot ids, so the task sees exactly the job's GPUs.
- **Signals**: SIGTERM/SIGINT (scancel, a time limit) are passed on to the task's process group.
- **End**: the task's last lines are shipped (at most :data:`SHIP_TIMEOUT_S`), then the exit is
  reported (``POST .../batch/exit`` with the rank and exit code, negative for a signal), and the
  launcher exits with the task's code (128 + N for signal N), which Slurm records as the job's.
  If the master cannot be told, Slurm's record of the job (the tracker) still carries the code.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

import httpx

from stalwart.agent.context import fetch_context, task_headers
from stalwart.agent.logs import LogContext
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.runner import ProcessRunner
from stalwart.agent.shipper import LogShipper
from stalwart.agent.workspace import prepare_workspace

__all__ = [
    "MASTER_URL_VAR",
    "TOKEN_FILE_NAME",
    "TOKEN_FILE_VAR",
    "LaunchError",
    "main",
    "run_task",
    "visible_slot_ids",
]

MASTER_URL_VAR = "STALWART_MASTER_URL"
TOKEN_FILE_VAR = "STALWART_TOKEN_FILE"
TOKEN_FILE_NAME = "token"
"""The token file's name in the job directory (written by the master, mode 0600)."""
SHIP_TIMEOUT_S = 15.0
_HIDDEN_VARS = (TOKEN_FILE_VAR,)
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
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


def _post(client: httpx.Client, url: str, token: str, body: dict[str, object]) -> httpx.Response:
    """POST with a few retries while the master is away (5xx, transport errors)."""
    last: Exception | None = None
    for attempt in range(6):
        try:
            response = client.post(url, json=body, headers=task_headers(token))
        except httpx.TransportError as exc:
            last = exc
        else:
            if response.status_code not in _RETRY_STATUS:
                return response
            last = LaunchError(f"{url}: HTTP {response.status_code}")
        threading.Event().wait(min(8.0, 0.5 * 2**attempt))
    raise LaunchError(f"the master at {url} did not answer: {last}")


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
    rank = int(environ.get("SLURM_NODEID") or environ.get("SLURM_PROCID") or 0)
    node = socket.gethostname()
    base = f"{master_url}/api/v1/allocations/{allocation_id}/batch"
    with httpx.Client(timeout=_TIMEOUT) as client:
        answer = _post(client, f"{base}/start", token, {"rank": rank, "node": node})
        if answer.status_code != 200:
            raise LaunchError(f"the master refused to start rank {rank}: {answer.text}")
        data = answer.json()
        if data.get("spec") is None:  # being killed: nothing to run
            print(f"stalwart: {data.get('message') or 'the allocation ended'}", flush=True)
            return 0
        spec = TaskSpec.model_validate(data["spec"])
        spec = spec.model_copy(update={"slot_ids": visible_slot_ids(spec, environ)})
        code, reason = _run(spec, client, master_url, node, environ)
        _post(
            client,
            f"{base}/exit",
            token,
            {"rank": rank, "exit_code": code, "reason": reason},
        )
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def _run(
    spec: TaskSpec,
    client: httpx.Client,
    master_url: str,
    node: str,
    environ: Mapping[str, str],
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
    runner = ProcessRunner()
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
        handle = runner.start(spec, workspace, stream.line)
    except Exception as exc:  # the task never started: say why, in its logs and its exit
        reason = f"failed to start: {exc}"
        stream.agent_line(f"container {reason}", "LOG_LEVEL_ERROR")
    else:

        def forward(signum: int, _frame: FrameType | None) -> None:
            stream.agent_line(f"the batch job got signal {signum}: passing it on to the task")
            runner.terminate(handle)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        stream.agent_line(f"started on {node} (Slurm job {environ.get('SLURM_JOB_ID', '?')})")
        while (code := runner.poll(handle)) is None:
            exited.wait(0.2)
        level = "LOG_LEVEL_INFO" if code == 0 else "LOG_LEVEL_ERROR"
        stream.agent_line(f"container exited with code {code}", level)
    shipper.release(stream)
    shipper.close(timeout=SHIP_TIMEOUT_S)
    return code, reason


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
