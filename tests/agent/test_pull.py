"""Image pulls on docker/podman agents, with the shipped fake engine (``fake_engine.py``) on
``PATH``: the runner's pull step, the daemon reporting ``pull_seconds`` (STARTING while it
pulls, kills while it pulls), the background pre-puller, and one trial on a real master and a
real ``stalwart agent --container-runtime docker`` process."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from stalwart.agent.containers import ContainerRunner
from stalwart.agent.context import fetch_context
from stalwart.agent.daemon import Daemon
from stalwart.agent.images import EngineImages
from stalwart.agent.loop import AgentLoop, create_agent
from stalwart.agent.prepull import Prepuller
from stalwart.agent.protocol import SlotInfo, SyncResponse, TaskSpec
from stalwart.agent.runner import ContainerStartError, Stdtype
from stalwart.agent.shipper import LogShipper
from stalwart.local import LocalCluster
from tests.agent.conftest import Master, closed_port, task_spec, wait_for
from tests.agent.test_daemon import agent_settings, status, until_exited
from tests.integration.api import Api
from tests.integration.conftest import free_port
from tests.master.test_allocations_api import TrialEnv

FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")
IMAGE = "registry.example.com/team/train:1.0"
PULL_S = 0.2


@dataclass
class FakeEngine:
    """The fake engine's state directory and the environment that puts it on ``PATH``."""

    state: Path
    env: dict[str, str]

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def pulls(self, image: str | None = None) -> int:
        return sum(c[:1] == ["pull"] and (image is None or c[1] == image) for c in self.calls())

    def inspects(self, image: str) -> int:
        return sum(c == ["image", "inspect", image] for c in self.calls())

    def configs_read(self) -> list[str | None]:
        """The credentials file each pull read (None: the engine's default)."""
        path = self.state / "auth.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    def holds(self, image: str) -> bool:
        """Whether a pull of ``image`` finished (``image inspect`` finds it)."""
        return (self.state / "images" / quote(image, safe="")).exists()

    def preload(self, image: str) -> None:
        """An image the engine holds already (without a logged pull)."""
        (self.state / "images").mkdir(parents=True, exist_ok=True)
        (self.state / "images" / quote(image, safe="")).write_text("preloaded")


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    """``docker`` and ``podman`` on ``PATH``: the fake engine, run by this Python."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    source = FAKE_ENGINE.read_text().split("\n", 1)[1]  # our interpreter, not the shebang's
    for name in ("docker", "podman"):
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\n{source}")
        script.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "STALWART_FAKE_ENGINE_DIR": str(tmp_path / "engine"),
        "STALWART_FAKE_PULL_SECONDS": str(PULL_S),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return FakeEngine(state=tmp_path / "engine", env=env)


class Lines:
    """An OutputSink that keeps what it gets."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, Stdtype]] = []

    def __call__(self, line: str, stdtype: Stdtype) -> None:
        self.lines.append((line, stdtype))

    def text(self) -> str:
        return "".join(line for line, _ in self.lines)


def spec_for(image: str, **extra: object) -> TaskSpec:
    fields = {"allocation_id": "e.1", "task_id": "e", "rank": 0, "container_id": "c0"}
    return TaskSpec.model_validate(
        {**fields, "image": image, "argv": ["true"], "token": "t", **extra}
    )


def runner() -> ContainerRunner:
    return ContainerRunner("docker", master_url="http://127.0.0.1:1", agent_id="n1")


# --- the runner's pull step ----------------------------------------------------------------


def test_a_missing_image_is_pulled_and_timed(fake_engine: FakeEngine) -> None:
    sink = Lines()
    seconds = runner().pull_image(spec_for(IMAGE), sink)
    assert seconds is not None
    assert seconds >= PULL_S
    assert fake_engine.calls() == [["image", "inspect", IMAGE], ["pull", IMAGE]]
    text = sink.text()
    assert text.startswith(f"pulling {IMAGE}...\n")
    assert "Status: Downloaded newer image for " + IMAGE in text  # the engine's own lines
    assert re.search(rf"pulled {re.escape(IMAGE)} in \d+\.\ds\n$", text), text


def test_a_present_image_is_not_pulled_unless_forced(fake_engine: FakeEngine) -> None:
    fake_engine.preload(IMAGE)
    sink = Lines()
    assert runner().pull_image(spec_for(IMAGE), sink) is None
    assert (fake_engine.pulls(), sink.lines) == (0, [])
    forced = runner().pull_image(spec_for(IMAGE, force_pull_image=True), sink)
    assert forced is not None
    assert forced >= PULL_S
    assert fake_engine.pulls(IMAGE) == 1
    assert fake_engine.inspects(IMAGE) == 1  # force does not even look


def test_a_failed_pull_says_why_and_what_to_do(fake_engine: FakeEngine) -> None:
    sink = Lines()
    with pytest.raises(ContainerStartError) as failed:
        runner().pull_image(spec_for("example.com/missing:2"), sink)
    message = str(failed.value)
    assert message.startswith("docker pull example.com/missing:2 failed (exit code 1): ")
    assert "manifest for example.com/missing:2 not found: manifest unknown" in message
    assert "`docker login <registry>`" in message
    assert "registry_auth" in message
    assert ("pulling example.com/missing:2...\n", "stdout") in sink.lines
    assert any("manifest unknown" in line and kind == "stderr" for line, kind in sink.lines)


def test_a_pull_that_hangs_is_stopped_at_the_timeout(
    fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STALWART_FAKE_PULL_SECONDS", "30")
    images = EngineImages("docker", pull_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(ContainerStartError, match=r"did not finish within 0.5s and was stopped"):
        images.ensure(IMAGE, sink=Lines())
    assert time.monotonic() - started < 10
    assert not images.present(IMAGE)


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_private_image_is_pulled_with_the_experiments_registry_auth(
    fake_engine: FakeEngine, engine: str
) -> None:
    """environment.registry_auth reaches the engine through a config file of its own, used for
    that pull only: never on the command line, gone afterwards."""
    image = "registry.example.com/team/private-model:1"
    runner = ContainerRunner(engine, master_url="http://127.0.0.1:1", agent_id="n1")  # type: ignore[arg-type]
    with pytest.raises(ContainerStartError, match="pull access denied"):
        runner.pull_image(spec_for(image), Lines())  # no credentials
    wrong = {"username": "stalwart", "password": "nope", "serveraddress": "registry.example.com"}
    with pytest.raises(ContainerStartError, match="pull access denied"):
        runner.pull_image(spec_for(image, registry_auth=wrong), Lines())
    right = {**wrong, "password": "s3cret"}
    assert runner.pull_image(spec_for(image, registry_auth=right), Lines()) is not None
    assert fake_engine.pulls(image) == 3
    assert all("s3cret" not in " ".join(call) for call in fake_engine.calls())
    read = fake_engine.configs_read()
    assert read[0] is None
    assert read[1] is not None
    assert read[2] is not None
    assert read[2].endswith("config.json")
    assert not Path(read[2]).exists()  # removed after the pull


def test_no_engine_is_a_start_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ContainerStartError, match=r"cannot run 'docker'.*install docker"):
        runner().pull_image(spec_for(IMAGE), Lines())


def _together(
    count: int, need: Callable[[], float | None], pulls: Callable[[], int]
) -> list[float | None]:
    """``need`` in ``count`` threads: the first, then the others once its pull is under way."""
    results: list[float | None] = []
    threads = [threading.Thread(target=lambda: results.append(need())) for _ in range(count)]
    before = pulls()
    threads[0].start()
    wait_for("the first pull", lambda: pulls() > before)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_concurrent_needs_of_one_image_pull_it_once(
    fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STALWART_FAKE_PULL_SECONDS", "0.5")
    images = EngineImages("docker")
    results = _together(3, lambda: images.ensure(IMAGE), lambda: fake_engine.pulls(IMAGE))
    assert fake_engine.pulls(IMAGE) == 1
    # whoever waited for the pull spent that time pulling too
    assert len(results) == 3
    assert all(seconds is not None and seconds > 0 for seconds in results), results

    # forced pulls waiting for one another pull once too (the ranks of one allocation)
    results = _together(
        2, lambda: images.ensure(IMAGE, force=True), lambda: fake_engine.pulls(IMAGE)
    )
    assert fake_engine.pulls(IMAGE) == 2
    assert all(seconds is not None and seconds > 0 for seconds in results), results
    assert images.ensure(IMAGE, force=True) is not None  # a later one pulls again
    assert fake_engine.pulls(IMAGE) == 3


# --- the daemon: STARTING while it pulls, pull_seconds in every later report -----------------


@pytest.fixture
def docker_daemon(master: Master, tmp_path: Path, fake_engine: FakeEngine) -> Iterator[Daemon]:
    settings = agent_settings(master.url, tmp_path / "agent", container_runtime="docker")
    shipper = LogShipper(settings.master_url, flush_seconds=0.05, max_backoff_seconds=0.2)
    images = EngineImages("docker")
    with httpx.Client() as http:

        def fetch(spec: TaskSpec) -> bytes:
            return fetch_context(http, settings.master_url, spec.task_id, spec.token)

        shipper.start()
        daemon = Daemon(
            settings,
            [SlotInfo(id="0", device_type="cpu")],
            runner=ContainerRunner(
                "docker", master_url=master.url, agent_id="agent-t", images=images
            ),
            shipper=shipper,
            fetch=fetch,
            base_env=dict(os.environ),
            prepuller=Prepuller(images),
        )
        try:
            yield daemon
        finally:
            daemon.shutdown(kill=True, grace=0.0)
            shipper.close(timeout=2.0)
            assert daemon.prepuller is not None
            daemon.prepuller.close()


def test_the_daemon_reports_pull_seconds_and_starts_after_the_pull(
    docker_daemon: Daemon, master: Master, trial: TrialEnv, fake_engine: FakeEngine
) -> None:
    script = "import os; print('inside', os.getcwd() == os.environ['DET_WORKDIR'] or os.getcwd())"
    spec = task_spec(trial, script, image=IMAGE)
    docker_daemon.apply(SyncResponse(start=[spec]))
    pulling = status(docker_daemon, spec)
    assert (pulling.state, pulling.pid, pulling.pull_seconds) == ("STARTING", None, None)
    final = until_exited(docker_daemon, spec)
    assert (final.exit_code, final.exit_reason) == (0, None)
    # the start after the pull is news for the loop (report RUNNING now), but not an exit
    assert docker_daemon.take_launched() is True
    assert docker_daemon.take_launched() is False
    assert final.pull_seconds is not None
    assert final.pull_seconds >= PULL_S
    run = [c for c in fake_engine.calls() if c[0] == "run"]
    assert len(run) == 1
    assert run[0][-4:] == [IMAGE, spec.argv[0], "-c", script]
    wait_for(
        "the pull lines at the master",
        lambda: "pulled " in "".join(e["log"] for e in master.task_logs(trial.task_id)),
    )
    text = "".join(e["log"] for e in master.task_logs(trial.task_id))
    text += "".join(line.log for line in final.logs)
    assert text.index(f"pulling {IMAGE}...\n") < text.index("pulled ") < text.index("inside ")


def test_a_failed_pull_or_a_kill_while_pulling_ends_the_container(
    docker_daemon: Daemon, trial: TrialEnv, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = task_spec(trial, "print(1)", image="example.com/missing:1")
    docker_daemon.apply(SyncResponse(start=[bad]))
    failed = until_exited(docker_daemon, bad)
    assert failed.exit_code is None
    assert failed.exit_reason is not None
    assert failed.exit_reason.startswith("failed to start: docker pull example.com/missing:1")
    assert "manifest unknown" in failed.exit_reason

    monkeypatch.setenv("STALWART_FAKE_PULL_SECONDS", "1.0")
    slow = task_spec(trial, "print(1)", rank=1, image="example.com/slow:1")
    docker_daemon.apply(SyncResponse(start=[slow]))
    container = docker_daemon.containers[(slow.allocation_id, slow.rank)]

    def pulling() -> bool:
        docker_daemon.refresh()  # the starter's workspace done, the pull thread under way
        return container.pulled is not None

    wait_for("the pull to begin", pulling)
    pulled = container.pulled
    assert pulled is not None
    assert status(docker_daemon, slow).state == "STARTING"
    docker_daemon.apply(SyncResponse(kill=[trial.allocation_id]))
    killed = until_exited(docker_daemon, slow)
    assert (killed.exit_code, killed.exit_reason) == (None, "killed before it started")
    wait_for("the pull to finish", pulled.is_set)
    docker_daemon.refresh()
    assert status(docker_daemon, slow).state == "EXITED"  # never started after the pull
    assert not [c for c in fake_engine.calls() if c[0] == "run"]


# --- the pre-puller --------------------------------------------------------------------------


def test_the_prepuller_pulls_the_plan_once_and_skips_present_images(
    fake_engine: FakeEngine,
) -> None:
    fake_engine.preload("b:1")
    puller = Prepuller(EngineImages("docker"))
    try:
        started = time.monotonic()
        puller.offer(["a:1", "b:1", "a:1", ""])
        assert time.monotonic() - started < 0.1  # never blocks the sync loop
        wait_for("the plan to be pulled", lambda: puller.pulled == {"a:1", "b:1"})
        puller.offer(["a:1", "b:1", "c:1"])
        wait_for("the new image", lambda: "c:1" in puller.pulled and puller.idle())
        puller.offer(["c:1", "a:1"])
        assert puller.idle()
    finally:
        puller.close()
    assert [c[1] for c in fake_engine.calls() if c[0] == "pull"] == ["a:1", "c:1"]
    assert fake_engine.inspects("b:1") == 1  # remembered, never looked up again


def test_a_failed_prepull_is_retried_after_the_backoff_and_logged_once(
    fake_engine: FakeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="stalwart.agent.prepull")
    puller = Prepuller(EngineImages("docker"), retry_seconds=0.8)
    try:
        puller.offer(["x/missing:1", "ok:1"])
        wait_for("the good image", lambda: "ok:1" in puller.pulled)
        first = fake_engine.pulls("x/missing:1")
        assert first == 1
        time.sleep(0.3)
        assert fake_engine.pulls("x/missing:1") == 1  # not before the backoff
        wait_for("the retry", lambda: fake_engine.pulls("x/missing:1") >= 2 and puller.idle())
    finally:
        puller.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "pre-pull of x/missing:1 failed" in warnings[0]
    assert "manifest unknown" in warnings[0]


def test_only_agents_with_an_engine_prepull(fake_engine: FakeEngine, tmp_path: Path) -> None:
    def agent(runtime: str) -> AgentLoop:
        settings = agent_settings(
            f"http://127.0.0.1:{closed_port()}",
            tmp_path / runtime,
            container_runtime=runtime,
            mount_namespaces="off",
        )
        return create_agent(settings, [SlotInfo(id="0", device_type="cpu")])

    plan = SyncResponse(prepull=[IMAGE])
    none, docker = agent("none"), agent("docker")
    try:
        assert none.daemon.prepuller is None
        none.daemon.apply(plan)
        time.sleep(0.1)
        # the agent without an engine ignored the plan (the docker one only listed leftovers)
        assert [c for c in fake_engine.calls() if c[0] != "ps"] == []
        prepuller, runner = docker.daemon.prepuller, docker.daemon.runner
        assert prepuller is not None
        assert isinstance(runner, ContainerRunner)
        assert prepuller.images is runner.images  # one lock per image for both
        docker.daemon.apply(plan)
        wait_for("the pre-pull", lambda: IMAGE in prepuller.pulled)
    finally:
        for loop in (none, docker):
            for close in loop._on_close:
                close()
    assert fake_engine.pulls(IMAGE) == 1


def test_a_restarted_agent_kills_the_containers_its_earlier_life_left(
    fake_engine: FakeEngine,
) -> None:
    """As with processes: a restarted agent does not adopt its old containers (the master
    reschedules their trials), so only its own labelled ones are killed; another agent's stay."""
    fake_engine.preload(IMAGE)

    def start(name: str, agent_id: str) -> subprocess.Popen[bytes]:
        argv = ["docker", "run", "--rm", "--name", name, "--label"]
        argv += [f"ai.stalwart.agent={agent_id}", IMAGE, "sleep", "60"]
        return subprocess.Popen(argv, env=os.environ.copy())

    mine, theirs = start("stalwart-old", "n1"), start("stalwart-other", "n2")
    try:
        pids = fake_engine.state / "containers"
        wait_for("both containers", lambda: len(list(pids.glob("*.pid"))) == 2)
        runner = ContainerRunner("docker", master_url="http://127.0.0.1:1", agent_id="n1")
        assert runner.kill_leftovers() == ["stalwart-old"]
        assert mine.wait(timeout=10) == 128 + 9  # SIGKILL, as docker reports it
        assert theirs.poll() is None
        assert runner.kill_leftovers() == []
    finally:
        subprocess.run(["docker", "kill", "stalwart-other"], capture_output=True, check=False)
        for proc in (mine, theirs):
            proc.kill()
            proc.wait()


# --- end to end ------------------------------------------------------------------------------


def _trial_output(api: Api, experiment: int, text: str) -> tuple[dict[str, Any], str]:
    """The experiment's first trial and its logs, once they hold ``text``."""
    trial: dict[str, Any] = api.wait_until(
        lambda: next(iter(api.trials(experiment)), None), timeout=20, what="the trial"
    )
    logs: str = api.wait_until(
        lambda: (found := api.logs(trial["id"])) and text in found and found,
        timeout=30,
        what="the trial's output",
    )
    return trial, logs


def test_a_trial_on_a_docker_agent_pulls_its_image_once(
    tmp_path: Path, fake_engine: FakeEngine
) -> None:
    image = "stalwart-test/e2e:1"
    config = tmp_path / "master.yaml"
    # No pre-pull plan: the agent could pull the experiment's image before the trial needs it.
    config.write_text(
        "cluster:\n  agent_timeout: 15\n  tick: 0.2\n  prepull:\n    enabled: false\n"
    )
    cluster = LocalCluster(
        home=tmp_path / "home", port=free_port(), master_config=config, env=fake_engine.env
    )
    cluster.start_master()
    try:
        cluster.start_agent("d1", slots=1, extra=["--container-runtime", "docker"])
        api = Api(cluster.url)
        try:
            experiment = api.create_experiment(
                "name: pull\n"
                "entrypoint: python3 -c \"print('hello from the container')\"\n"
                f"environment:\n  image: {image}\n"
                "max_restarts: 0\n"
                "resources:\n  slots_per_trial: 1\n"
                "searcher:\n  name: single\n  metric: loss\n",
                {"readme.txt": "nothing to see\n"},
            )
            trial, logs = _trial_output(api, experiment, "hello from the container")
            assert f"pulling {image}...\n" in logs
            assert re.search(rf"pulled {re.escape(image)} in \d+\.\ds\n", logs), logs
            assert logs.index("pulled ") < logs.index("hello from the container")
            task = api.get(f"/api/v1/tasks/{trial['taskId']}")["task"]
            pulled = [a.get("imagePullSeconds") for a in task["allocations"]]
            assert pulled, task
            assert pulled[0] is not None, task
            assert pulled[0] >= PULL_S, task
        finally:
            api.close()
    finally:
        cluster.stop()
    assert fake_engine.pulls(image) == 1


def test_a_docker_agent_prepulls_a_queued_experiments_image_before_its_trial(
    tmp_path: Path, fake_engine: FakeEngine
) -> None:
    """The master's pre-pull plan reaches the agent: the image of an experiment that waits
    (paused) is pulled in the background, so its trial starts without pulling."""
    image = "stalwart-test/queued:2"
    config = tmp_path / "master.yaml"
    config.write_text(
        "cluster:\n  agent_timeout: 15\n  tick: 0.2\n"
        "  prepull:\n    include_manifest_defaults: false\n    refresh_seconds: 0.5\n"
    )
    cluster = LocalCluster(
        home=tmp_path / "home", port=free_port(), master_config=config, env=fake_engine.env
    )
    cluster.start_master()
    try:
        api = Api(cluster.url)
        try:
            experiment = api.create_experiment(
                "name: queued\n"
                "entrypoint: python3 -c \"print('started without a pull')\"\n"
                f"environment:\n  image: {image}\n"
                "max_restarts: 0\n"
                "searcher:\n  name: single\n  metric: loss\n",
                {"readme.txt": "nothing to see\n"},
                activate=False,
            )
            cluster.start_agent("d1", slots=1, extra=["--container-runtime", "docker"])
            api.wait_until(lambda: fake_engine.holds(image), timeout=30, what="the pre-pull")
            assert api.experiment(experiment)["state"] == "STATE_PAUSED"  # nothing ran yet
            api.post(f"/api/v1/experiments/{experiment}/activate")
            trial, logs = _trial_output(api, experiment, "started without a pull")
            assert "pulling " not in logs, logs
            task = api.get(f"/api/v1/tasks/{trial['taskId']}")["task"]
            (waited,) = [a.get("imagePullSeconds") for a in task["allocations"]]
            # None, or the last milliseconds of the pre-pull's `docker pull` exiting (the trial
            # then waits for it rather than pulling): never a pull of its own.
            assert waited is None or waited < PULL_S, task
        finally:
            api.close()
    finally:
        cluster.stop()
    assert fake_engine.pulls(image) == 1
