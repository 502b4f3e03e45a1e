"""A real Azure Blob emulator for tests: Azurite (Microsoft's, from npm) on a loopback port.

- Azurite is installed once with npm into ``<repo>/.cache/azurite`` (pinned; a marker file is
  written last, under a file lock, so concurrent runs wait for one install; delete the folder
  to reinstall). Without node/npm or the npm registry the tests skip, except under CI=true,
  where they fail.
- :func:`running_azure_server` starts ``azurite-blob`` as a subprocess, in memory, on a free
  port, and stops it when the block ends; tests make a container each
  (:meth:`AzureServer.new_container`) in the well-known development account.
"""

from __future__ import annotations

import contextlib
import fcntl
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stalwart.storage import FsspecStorage, azure_storage
from tests.storage.s3 import FAST
from tests.storage.services import require_module, unavailable

AZURITE_VERSION = "3.35.0"
"""The last Azurite release that runs on node 20 (3.36 wants node 21+)."""
REPO = Path(__file__).resolve().parents[2]
AZURITE_DIR = REPO / ".cache" / "azurite"
_MARKER = AZURITE_DIR / ".stalwart-installed"
_REQUIREMENT = f"azurite@{AZURITE_VERSION}"
INSTALL_TIMEOUT_S = 600.0
START_TIMEOUT_S = 30.0

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's development account and its published key (not a secret)."""

_LISTENING = re.compile(r"listens on (http://\S+?)/?\s*$")


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _install() -> None:
    npm = shutil.which("npm")
    if npm is None:
        unavailable("Azurite (the Azure Blob emulator) needs npm, which is not installed")
    shutil.rmtree(AZURITE_DIR, ignore_errors=True)
    AZURITE_DIR.mkdir(parents=True)
    cmd = [
        npm,
        "install",
        "--prefix",
        str(AZURITE_DIR),
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--loglevel=error",
        _REQUIREMENT,
    ]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(AZURITE_DIR, ignore_errors=True)
        unavailable(f"npm install {_REQUIREMENT} took over {INSTALL_TIMEOUT_S:.0f} s")
    if (
        done.returncode != 0
        or not (AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob").exists()
    ):
        shutil.rmtree(AZURITE_DIR, ignore_errors=True)
        unavailable(
            f"cannot npm install {_REQUIREMENT} into {AZURITE_DIR} (exit {done.returncode})\n"
            f"{_tail(done.stdout + done.stderr)}"
        )
    _MARKER.write_text(_REQUIREMENT + "\n", encoding="utf-8")


def azurite_blob() -> Path:
    """The ``azurite-blob`` executable of the cached install (installed on first use)."""
    AZURITE_DIR.parent.mkdir(exist_ok=True)
    with (AZURITE_DIR.parent / "azurite.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            current = _MARKER.read_text(encoding="utf-8").strip() if _MARKER.exists() else ""
            exe = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"
            if current != _REQUIREMENT or not exe.exists():
                _install()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return exe


@dataclass
class AzureServer:
    """A running Azurite blob service."""

    blob_endpoint: str
    """``http://127.0.0.1:<port>/devstoreaccount1``."""
    process: subprocess.Popen[str]

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.blob_endpoint};"
        )

    def new_container(self) -> str:
        """A new, empty container."""
        name = f"c-{uuid.uuid4().hex[:16]}"
        self.client().mkdir(name)
        return name

    def client(self) -> Any:
        """A plain adlfs file system on the emulator (to look at what the storage wrote)."""
        import adlfs  # type: ignore[import-untyped]

        return adlfs.AzureBlobFileSystem(
            connection_string=self.connection_string, skip_instance_cache=True
        )

    def storage(self, container: str) -> FsspecStorage:
        return azure_storage(container, connection_string=self.connection_string, retry=FAST)

    def config(self, container: str) -> dict[str, Any]:
        """The ``checkpoint_storage`` config of this emulator's container."""
        return {
            "type": "azure",
            "container": container,
            "connection_string": self.connection_string,
        }


def _read_lines(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@contextlib.contextmanager
def running_azure_server() -> Iterator[AzureServer]:
    """Azurite's blob service until the block ends (skipped when it cannot be had, except under
    CI=true)."""
    require_module("adlfs", "the Azure storage")
    if shutil.which("node") is None:
        unavailable("Azurite (the Azure Blob emulator) needs node, which is not installed")
    exe = azurite_blob()
    with tempfile.TemporaryDirectory(prefix="azurite-") as workdir:
        process = subprocess.Popen(
            [
                str(exe),
                "--inMemoryPersistence",
                "--extentMemoryLimit",
                "512",
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                "0",
                "--skipApiVersionCheck",  # the Python SDK may be newer than this Azurite
                "--disableTelemetry",
                "--silent",
            ],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
        reader.start()
        try:
            yield AzureServer(blob_endpoint=_wait_for_port(process, lines), process=process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            reader.join(timeout=10)  # it reads to the end of the output, then the pipe closes
            if process.stdout is not None:
                process.stdout.close()


def _wait_for_port(process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> str:
    """The blob endpoint Azurite says it listens on (it picks the port)."""
    seen: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break  # it exited
        seen.append(line)
        found = _LISTENING.search(line)
        if found:
            return f"{found.group(1)}/{ACCOUNT}"
    process.kill()
    process.wait()
    unavailable(
        f"azurite-blob did not start in {START_TIMEOUT_S:.0f} s (exit {process.returncode})\n"
        + _tail("".join(seen))
    )
    raise AssertionError("unreachable")  # pragma: no cover - unavailable() raised
