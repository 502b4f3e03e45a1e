#!/usr/bin/env python3
r"""A fake ``docker`` / ``podman`` CLI for the agent's tests (standard library only).

The ``fake_engine`` fixture (``tests/agent/test_pull.py``) installs it on ``PATH`` as ``docker``
and ``podman``. Its state lives in ``$STALWART_FAKE_ENGINE_DIR``:

- ``images/<quoted name>``: the images pulled so far;
- ``calls.jsonl``: one JSON list per invocation (its arguments), so tests can count pulls;
- ``containers/<name>.pid``: the host process of each running ``--name``.

Commands, with the real engines' exit codes and messages:

- ``pull IMAGE``: sleeps ``$STALWART_FAKE_PULL_SECONDS`` (default 0.2), prints docker-like
  progress and records the image. An image whose name contains ``missing`` fails with the
  registry's "manifest unknown" on stderr (exit 1). An image whose name contains ``private``
  needs credentials for its registry (the first path part when it has a dot or a colon, else
  Docker Hub) in the engine's config (``$DOCKER_CONFIG/config.json``, podman's
  ``$REGISTRY_AUTH_FILE``) whose ``auth`` is base64 of ``$STALWART_FAKE_REGISTRY_LOGIN``
  (default ``stalwart:s3cret``); otherwise "pull access denied" (exit 1). Each pull appends
  the config file it read (or null) to ``auth.jsonl``.
- ``image inspect IMAGE``: exit 0 with a JSON description when pulled, else exit 1 with
  ``Error: No such image: IMAGE``.
- ``run [OPTIONS] IMAGE ARGV...``: exit 125 "Unable to find image" unless pulled (the agent
  pulls first, and a real ``run`` would pull behind its back); else runs ARGV as a host process
  in the host side of ``-w`` (through the ``-v HOST:CONTAINER`` mounts) with the variables
  named by ``-e NAME`` (values from the CLI's environment) plus the CLI's ``PATH`` (standing in
  for the image's), and exits with its code (128 + N when killed by signal N, as docker does).
- ``kill --signal SIG NAME...``: signals the process of each ``--name NAME``.
- ``ps --filter label=KEY=VALUE --format {{.Names}}``: the names of the running containers
  whose ``--label``\ s include it (``containers/<name>.labels``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

DOCKER_HUB = "https://index.docker.io/v1/"

# run's options that take a value (every other option is a flag)
_VALUED = {
    "--name",
    "--network",
    "--shm-size",
    "--label",
    "-v",
    "--volume",
    "-w",
    "--workdir",
    "-e",
    "--env",
    "--gpus",
    "--device",
    "--group-add",
}


def _state() -> Path:
    root = Path(os.environ["STALWART_FAKE_ENGINE_DIR"])
    for sub in ("images", "containers"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def _image_file(state: Path, image: str) -> Path:
    return state / "images" / quote(image, safe="")


def _credentials_file() -> Path | None:
    if "REGISTRY_AUTH_FILE" in os.environ:
        return Path(os.environ["REGISTRY_AUTH_FILE"])
    if "DOCKER_CONFIG" in os.environ:
        return Path(os.environ["DOCKER_CONFIG"]) / "config.json"
    return None


def _logged_in(image: str, config: Path | None) -> bool:
    first = image.split("/")[0]
    registry = first if "/" in image and ("." in first or ":" in first) else DOCKER_HUB
    try:
        auths = json.loads(config.read_text())["auths"] if config else {}
    except (OSError, ValueError, KeyError):
        return False
    login = os.environ.get("STALWART_FAKE_REGISTRY_LOGIN", "stalwart:s3cret")
    wanted = base64.b64encode(login.encode()).decode()
    return bool((auths.get(registry) or {}).get("auth") == wanted)


def _pull(state: Path, image: str) -> int:
    repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "latest")
    config = _credentials_file()
    with (state / "auth.jsonl").open("a", encoding="utf-8") as seen:
        seen.write(json.dumps(str(config) if config else None) + "\n")
    print(f"{tag}: Pulling from {repo}", flush=True)
    time.sleep(float(os.environ.get("STALWART_FAKE_PULL_SECONDS", "0.2")))
    if "private" in image and not _logged_in(image, config):
        print(
            f"Error response from daemon: pull access denied for {repo}, repository does not "
            "exist or may require 'docker login': denied: requested access to the resource is "
            "denied",
            file=sys.stderr,
        )
        return 1
    if "missing" in image:
        print(
            f"Error response from daemon: manifest for {image} not found: manifest unknown: "
            "manifest unknown",
            file=sys.stderr,
        )
        return 1
    digest = hashlib.sha256(image.encode()).hexdigest()
    print("0123456789ab: Pull complete", flush=True)
    print(f"Digest: sha256:{digest}")
    print(f"Status: Downloaded newer image for {image}")
    print(image)
    _image_file(state, image).write_text(digest)
    return 0


def _inspect(state: Path, image: str) -> int:
    path = _image_file(state, image)
    if not path.exists():
        print("[]")
        print(f"Error: No such image: {image}", file=sys.stderr)
        return 1
    print(json.dumps([{"Id": f"sha256:{path.read_text()}", "RepoTags": [image]}], indent=4))
    return 0


def _host_path(path: str, mounts: list[tuple[str, str]]) -> str:
    """The host side of a container path, through the longest matching mount."""
    for host, inside in sorted(mounts, key=lambda m: len(m[1]), reverse=True):
        if path == inside or path.startswith(inside.rstrip("/") + "/"):
            return host + path[len(inside.rstrip("/")) :]
    return path


def _run(state: Path, args: list[str]) -> int:
    name, workdir = "", "/"
    labels: dict[str, str] = {}
    mounts: list[tuple[str, str]] = []
    env_names: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        option = args[i]
        value = args[i + 1] if option in _VALUED and i + 1 < len(args) else ""
        i += 2 if option in _VALUED else 1
        if option == "--name":
            name = value
        elif option in ("-w", "--workdir"):
            workdir = value
        elif option in ("-v", "--volume"):
            host, _, inside = value.partition(":")
            mounts.append((host, inside.split(":")[0]))
        elif option in ("-e", "--env"):
            env_names.append(value)
        elif option == "--label":
            key, _, label = value.partition("=")
            labels[key] = label
    if i >= len(args):
        print('"docker run" requires at least 1 argument.', file=sys.stderr)
        return 125
    image, argv = args[i], args[i + 1 :]
    if not _image_file(state, image).exists():
        print(f"Unable to find image '{image}' locally", file=sys.stderr)
        return 125
    env = {key: os.environ[key] for key in env_names if key in os.environ}
    env.setdefault("PATH", os.environ.get("PATH", os.defpath))
    try:
        proc = subprocess.Popen(argv, cwd=_host_path(workdir, mounts), env=env)
    except OSError as exc:
        print(f"docker: Error response from daemon: {exc}", file=sys.stderr)
        return 127
    pid_file = state / "containers" / f"{name}.pid"
    labels_file = state / "containers" / f"{name}.labels"
    if name:
        labels_file.write_text(json.dumps(labels))
        pid_file.write_text(str(proc.pid))
    try:
        code = proc.wait()
    finally:
        if name:
            pid_file.unlink(missing_ok=True)
            labels_file.unlink(missing_ok=True)
    return 128 - code if code < 0 else code


def _kill(state: Path, args: list[str]) -> int:
    signame, names = "KILL", []
    i = 0
    while i < len(args):
        if args[i] in ("--signal", "-s"):
            signame = args[i + 1]
            i += 2
        else:
            names.append(args[i])
            i += 1
    code = 0
    for name in names:
        try:
            pid = int((state / "containers" / f"{name}.pid").read_text())
            os.kill(pid, signal.Signals["SIG" + signame.removeprefix("SIG")])
        except (OSError, ValueError):
            print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
            code = 1
    return code


def _ps(state: Path, args: list[str]) -> int:
    wanted: dict[str, str] = {}
    for i, arg in enumerate(args[:-1]):
        if arg == "--filter" and args[i + 1].startswith("label="):
            key, _, value = args[i + 1].removeprefix("label=").partition("=")
            wanted[key] = value
    for labels_file in sorted((state / "containers").glob("*.labels")):
        labels = json.loads(labels_file.read_text())
        alive = labels_file.with_suffix(".pid").exists()
        if alive and all(labels.get(k) == v for k, v in wanted.items()):
            print(labels_file.stem)
    return 0


def main(args: list[str]) -> int:
    state = _state()
    with (state / "calls.jsonl").open("a", encoding="utf-8") as calls:
        calls.write(json.dumps(args) + "\n")
    match args:
        case ["pull", image]:
            return _pull(state, image)
        case ["image", "inspect", image]:
            return _inspect(state, image)
        case ["run", *rest]:
            return _run(state, rest)
        case ["kill", *rest]:
            return _kill(state, rest)
        case ["ps", *rest]:
            return _ps(state, rest)
    print(f"fake engine: unsupported command {args}", file=sys.stderr)
    return 125


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
