"""``EngineImages``: the images of the node's container engine (docker or podman).

One object per agent, shared by the :class:`~stalwart.agent.containers.ContainerRunner` (which
makes sure a task's image is there before ``<engine> run``) and the background
:class:`~stalwart.agent.prepull.Prepuller`. It is thread-safe: each image has a lock, held while
the image is looked up and pulled, so a task that needs the image the pre-puller is pulling
waits for that pull instead of starting a second one, and then finds the image present.

Presence is ``<engine> image inspect IMAGE`` (exit 0); a pull is ``<engine> pull IMAGE``, timed
with :func:`time.monotonic`; a pull still running after ``pull_timeout`` seconds is killed. A
failed pull is a
:class:`~stalwart.agent.runner.ContainerStartError` quoting the engine's last stderr lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from stalwart.agent.runner import ContainerStartError, LineSplitter, OutputSink, Stdtype
from stalwart.environments.registry import docker_config

__all__ = ["INSPECT_TIMEOUT_S", "EngineImages", "pull_failed_message"]

INSPECT_TIMEOUT_S = 60.0
_QUOTED_LINES = 5


def pull_failed_message(engine: str, image: str, code: int, stderr_lines: list[str]) -> str:
    """What a user reads when ``<engine> pull IMAGE`` failed: the engine's last stderr lines
    and what to check."""
    said = " | ".join(line.strip() for line in stderr_lines[-_QUOTED_LINES:] if line.strip())
    return (
        f"{engine} pull {image} failed (exit code {code}): {said or 'no error message'}. "
        "Check the image name and tag in the experiment's environment.image; for a private "
        f"registry, run `{engine} login <registry>` on this node as the user the agent runs as "
        "(or give the experiment environment.registry_auth)"
    )


class EngineImages:
    """The engine's images: look up, pull (timed), one lock per image (see the module)."""

    def __init__(
        self,
        engine: str,
        *,
        pull_timeout: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.pull_timeout = pull_timeout
        self.clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._pulled_at: dict[str, float] = {}  # image -> when its last pull here succeeded
        self._guard = threading.Lock()

    def lock(self, image: str) -> threading.Lock:
        """The lock held while ``image`` is looked up or pulled."""
        with self._guard:
            return self._locks.setdefault(image, threading.Lock())

    def present(self, image: str) -> bool:
        """Whether the engine holds ``image`` (``<engine> image inspect`` exits 0)."""
        try:
            done = subprocess.run(
                [self.engine, "image", "inspect", image],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=INSPECT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ContainerStartError(
                f"{self.engine} image inspect {image} did not answer within "
                f"{INSPECT_TIMEOUT_S:g}s; is the {self.engine} daemon healthy?"
            ) from exc
        except OSError as exc:
            raise self._cannot_run(exc) from exc
        return done.returncode == 0

    def pull(
        self,
        image: str,
        sink: OutputSink | None = None,
        auth: Mapping[str, str] | None = None,
    ) -> float:
        """Run ``<engine> pull IMAGE``; the seconds it took.

        With ``auth`` (``environment.registry_auth``) the engine reads the credentials from a
        private Docker config written for this pull only and removed after it (docker:
        ``DOCKER_CONFIG``; podman: ``REGISTRY_AUTH_FILE``): they never reach the command line
        or the node's own login.

        Its output lines (and ours: "pulling IMAGE...", "pulled IMAGE in 12.3s") go to
        ``sink`` when given. Raises ContainerStartError when the pull fails. The caller holds
        :meth:`lock`.
        """
        if sink is not None:
            sink(f"pulling {image}...\n", "stdout")
        with contextlib.ExitStack() as stack:
            env = None
            if auth:
                env = {**os.environ, **self._auth_env(stack, auth)}
            return self._pull(image, sink, env)

    def _auth_env(self, stack: contextlib.ExitStack, auth: Mapping[str, str]) -> dict[str, str]:
        """The variables pointing the engine at a private config holding ``auth``."""
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stalwart-auth-")))
        config = folder / "config.json"
        config.touch(mode=0o600)
        config.write_text(json.dumps(docker_config(auth)), encoding="utf-8")
        if self.engine == "podman":
            return {"REGISTRY_AUTH_FILE": str(config)}
        return {"DOCKER_CONFIG": str(folder)}

    def _pull(self, image: str, sink: OutputSink | None, env: dict[str, str] | None) -> float:
        started = self.clock()
        try:
            proc = subprocess.Popen(
                [self.engine, "pull", image],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise self._cannot_run(exc) from exc
        errors: list[str] = []
        assert proc.stdout is not None
        assert proc.stderr is not None
        reader = threading.Thread(
            target=_read_lines,
            args=(proc.stderr, "stderr", sink, errors),
            name=f"pull {image} stderr",
            daemon=True,
        )
        reader.start()
        watchdog = threading.Timer(self.pull_timeout, proc.kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            _read_lines(proc.stdout, "stdout", sink, None)
            code = proc.wait()
            reader.join()
        finally:
            watchdog.cancel()
        seconds = max(0.0, self.clock() - started)
        if watchdog.finished.is_set() and code != 0 and seconds >= self.pull_timeout:
            raise ContainerStartError(
                f"{self.engine} pull {image} did not finish within {self.pull_timeout:g}s and "
                "was stopped; check the node's network and registry, or raise the agent's "
                "--image-pull-timeout for very large images"
            )
        if code != 0:
            raise ContainerStartError(pull_failed_message(self.engine, image, code, errors))
        with self._guard:
            self._pulled_at[image] = self.clock()
        if sink is not None:
            sink(f"pulled {image} in {seconds:.1f}s\n", "stdout")
        return seconds

    def ensure(
        self,
        image: str,
        *,
        force: bool = False,
        sink: OutputSink | None = None,
        auth: Mapping[str, str] | None = None,
    ) -> float | None:
        """Make sure the engine holds ``image``: pull it when missing (or always with
        ``force``, unless a pull of it finished while this call waited for it: the ranks of one
        allocation pull once). The seconds spent pulling, including any wait for a pull of the
        same image already under way (the pre-puller's); None when the image was there at
        once."""
        lock = self.lock(image)
        waited_since: float | None = None
        if not lock.acquire(blocking=False):
            waited_since = self.clock()
            if sink is not None:
                sink(f"waiting for the pull of {image} under way...\n", "stdout")
            lock.acquire()
        try:
            if waited_since is not None:
                with self._guard:
                    fresh = self._pulled_at.get(image, float("-inf")) >= waited_since
                if fresh or (not force and self.present(image)):
                    return max(0.0, self.clock() - waited_since)
            elif not force and self.present(image):
                return None
            seconds = self.pull(image, sink, auth)
            if waited_since is not None:
                seconds = max(seconds, self.clock() - waited_since)
            return seconds
        finally:
            lock.release()

    def _cannot_run(self, exc: OSError) -> ContainerStartError:
        return ContainerStartError(
            f"cannot run {self.engine!r}: {exc.strerror or exc}; install {self.engine} on this "
            "node or start the agent with another --container-runtime"
        )


def _read_lines(
    stream: IO[bytes], stdtype: Stdtype, sink: OutputSink | None, keep: list[str] | None
) -> None:
    """Hand the lines of a pipe to ``sink`` (and append them to ``keep``) until it closes."""
    splitter = LineSplitter()
    with stream:
        while True:
            chunk = os.read(stream.fileno(), 64 * 1024)
            for line in splitter.feed(chunk) if chunk else splitter.finish():
                if keep is not None:
                    keep.append(line)
                if sink is not None:
                    sink(line, stdtype)
            if not chunk:
                return
