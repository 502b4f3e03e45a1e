"""The sync loop against a real master: registration, a wrong token, an outage that leaves the
containers running, the master coming back, and stopping without (or with) killing; enrollment
(the agent's own token kept 0600 in its home and used after a restart) and what the agent does
when the master refuses its token."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from stalwart.agent.credentials import AgentCredential
from stalwart.agent.loop import AgentLoop, post_sync
from stalwart.agent.protocol import AGENT_TOKEN_HEADER, SlotInfo, SyncRequest, SyncResponse
from stalwart.errors import FailedPreconditionError, UnauthenticatedError
from stalwart.master.db.tables import AgentCredential as CredentialRow
from tests.agent.conftest import Master, closed_port, master_settings, serve, task_spec, wait_for
from tests.agent.test_daemon import SLEEPER, agent_settings, make_daemon, until_started
from tests.master.test_allocations_api import TrialEnv

SLOTS = [SlotInfo(id="0", device_type="cpu")]


def agent_ids(master: Master) -> list[str]:
    with master.http() as http:
        resp = http.get("/api/v1/agents", headers=master.admin())
    assert resp.status_code == 200, resp.text
    return [agent["id"] for agent in resp.json()["agents"]]


@contextmanager
def running(loop: AgentLoop) -> Iterator[threading.Thread]:
    """Run the loop in a thread; stop it and require it to return."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            loop.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        loop.stop()
        thread.join(timeout=15)
        assert not thread.is_alive(), "the agent loop did not stop"
    if errors:
        raise errors[0]


def test_a_wrong_agent_token_is_fatal(master: Master, tmp_path: Path) -> None:
    settings = agent_settings(master.url, tmp_path, token="wrong")

    async def sync() -> SyncResponse:
        async with httpx.AsyncClient() as client:
            return await post_sync(client, settings, SyncRequest(slots=SLOTS))

    with pytest.raises(UnauthenticatedError, match="refused the agent token"):
        asyncio.run(sync())
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        with pytest.raises(UnauthenticatedError), running(loop):
            wait_for("the loop to give up", lambda: not loop.daemon.shipper._thread.is_alive())


def test_the_agent_registers_and_long_polls(master: Master, tmp_path: Path) -> None:
    settings = agent_settings(
        master.url,
        tmp_path,
        token=master.state.agent_token,
        agent_id="agent-reg",
        idle_wait_seconds=0.3,
    )
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        with running(loop):
            wait_for("the agent to register", lambda: "agent-reg" in agent_ids(master))
            wait_for("a second sync", lambda: loop.syncs >= 2)
            assert loop.ready_file.read_text() == "agent-reg\n"
        assert not loop.ready_file.exists()


def test_an_outage_keeps_containers_running_and_the_agent_comes_back(
    tmp_path: Path, trial_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings_m = master_settings(trial_home)
    with serve(settings_m) as first:
        trial, port, token = first.trial(), first.port, first.state.agent_token
    settings = agent_settings(f"http://127.0.0.1:{port}", tmp_path, token=token)
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        spec = task_spec(trial, SLEEPER)
        loop.daemon.apply(SyncResponse(start=[spec]))
        pid = until_started(loop.daemon, spec).pid
        assert pid is not None
        with (
            caplog.at_level(logging.INFO, logger="stalwart.agent"),
            running(loop) as thread,
        ):
            wait_for("the outage to be noticed", lambda: "unreachable" in caplog.text)
            assert _alive(pid)
            with serve(settings_m, port=port) as again:
                wait_for("the master to be back", lambda: "master back" in caplog.text)
                assert "agent-t" in agent_ids(again)
                # The master does not know the container, so it has it killed.
                wait_for("the unknown container to stop", lambda: not _alive(pid))
                wait_for("its exit to be reported", lambda: not loop.daemon.containers)
                loop.stop()  # while the master is up, so the last lines ship
                thread.join(timeout=15)
        assert caplog.text.count("unreachable") == 1


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return not stat.split(") ", 1)[1].startswith("Z")


@pytest.fixture
def trial_home(tmp_path: Path) -> Path:
    return tmp_path / "master-home"


@pytest.mark.parametrize("kill_on_exit", [False, True])
def test_stop_leaves_containers_unless_kill_on_exit(
    tmp_path: Path, trial: TrialEnv, master: Master, kill_on_exit: bool
) -> None:
    settings = agent_settings(
        f"http://127.0.0.1:{closed_port()}",
        tmp_path,
        kill_on_exit=kill_on_exit,
        kill_grace_seconds=0.2,
        max_backoff_seconds=0.1,
        exit_log_wait_seconds=0.1,
        shutdown_log_timeout_seconds=0.1,
    )
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        spec = task_spec(trial, SLEEPER)
        loop.daemon.apply(SyncResponse(start=[spec]))
        pid = until_started(loop.daemon, spec).pid
        assert pid is not None
        with running(loop):
            pass
        assert _alive(pid) is not kill_on_exit
        if not kill_on_exit:
            loop.daemon.shutdown(kill=True, grace=0.0)


def test_an_abandoned_long_poll_stops_listening_at_once(master: Master) -> None:
    """An agent that gives up a held sync (it has news) leaves nothing waiting at the master."""
    key = "agent:agent-gone"
    body = SyncRequest(slots=SLOTS, wait_seconds=30.0).model_dump_json()
    url = f"{master.url}/api/v1/agents/agent-gone/sync"
    with httpx.Client(timeout=5.0) as http:
        enrolled = http.post(url, json={}, headers={AGENT_TOKEN_HEADER: master.state.agent_token})
        own = enrolled.json()["agent_token"]
        headers = {AGENT_TOKEN_HEADER: own, "Content-Type": "application/json"}
        http.post(url, content=SyncRequest(slots=SLOTS).model_dump_json(), headers=headers)

    async def abandon() -> None:
        async with httpx.AsyncClient(timeout=60.0) as client:
            held = asyncio.create_task(client.post(url, content=body, headers=headers))
            await asyncio.to_thread(
                wait_for, "the sync to be held", lambda: master.state.notifier.listeners(key) == 1
            )
            held.cancel()  # the agent's loop does this when a container exits
            with contextlib.suppress(asyncio.CancelledError):
                await held

    asyncio.run(abandon())
    wait_for(
        "the master to stop holding it", lambda: master.state.notifier.listeners(key) == 0, 1.0
    )


# -- enrollment and the agent's own token -----------------------------------------------------


def _stored_hash(master: Master, agent_id: str) -> str | None:
    with master.state.sessions() as session:
        row = session.get(CredentialRow, agent_id)
        return None if row is None else row.token_hash


def _revoke(master: Master, agent_id: str, *, reenroll: bool) -> None:
    with master.http() as http:
        resp = http.delete(
            f"/api/v1/agents/{agent_id}/token",
            params={"reenroll": "true"} if reenroll else None,
            headers=master.admin(),
        )
    assert resp.status_code == 200, resp.text


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_the_agent_keeps_its_own_token_0600_and_uses_it_after_a_restart(
    master: Master, tmp_path: Path
) -> None:
    settings = agent_settings(
        master.url,
        tmp_path,
        token=master.state.agent_token,
        agent_id="agent-own",
        idle_wait_seconds=0.3,
    )
    stored = tmp_path / "agent_token"
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        assert not loop.credential.enrolled
        with running(loop):
            wait_for("the agent to register", lambda: "agent-own" in agent_ids(master))
            wait_for("a second sync", lambda: loop.syncs >= 2)
        assert loop.credential.enrolled
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    token = stored.read_text().strip()
    assert _stored_hash(master, "agent-own") == _sha(token)
    assert sorted(p.name for p in tmp_path.iterdir() if "agent_token" in p.name) == ["agent_token"]
    # Restarted without any enrollment token: the stored one is all it needs.
    again = settings.model_copy(update={"token": ""})
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(again, http))
        assert loop.credential.enrolled
        assert loop.credential.token == token
        with running(loop):
            wait_for("two syncs", lambda: loop.syncs >= 2)
    assert stored.read_text().strip() == token  # not enrolled again
    assert _stored_hash(master, "agent-own") == _sha(token)


def test_a_refused_own_token_falls_back_to_the_enrollment_token_once(
    master: Master, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An admin lets the id enroll again while the agent runs: its held sync is refused, it
    enrolls with the enrollment token and carries on with a new token of its own."""
    settings = agent_settings(
        master.url,
        tmp_path,
        token=master.state.agent_token,
        agent_id="agent-again",
        idle_wait_seconds=5.0,
    )
    stored = tmp_path / "agent_token"
    with (
        httpx.Client() as http,
        caplog.at_level(logging.INFO, logger="stalwart.agent"),
    ):
        loop = AgentLoop(make_daemon(settings, http))
        with running(loop):
            wait_for("the agent to register", lambda: loop.syncs >= 1)
            first = stored.read_text().strip()
            syncs = loop.syncs
            _revoke(master, "agent-again", reenroll=True)
            wait_for("a new token", lambda: stored.read_text().strip() != first)
            wait_for("a sync with it", lambda: loop.syncs > syncs)
    assert "refused this agent's own token" in caplog.text
    assert _stored_hash(master, "agent-again") == _sha(stored.read_text().strip())


def test_a_forbidden_agent_stops_with_the_masters_reason(master: Master, tmp_path: Path) -> None:
    """Forbidden: the agent's own token is refused, so is the enrollment token it falls back
    on: fatal, with the master's reason."""
    settings = agent_settings(
        master.url,
        tmp_path,
        token=master.state.agent_token,
        agent_id="agent-forbidden",
        idle_wait_seconds=0.3,
    )
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        with running(loop):
            wait_for("the agent to register", lambda: loop.syncs >= 1)
        _revoke(master, "agent-forbidden", reenroll=False)
        loop = AgentLoop(make_daemon(settings, http))
        assert loop.credential.enrolled
        with (
            pytest.raises(UnauthenticatedError, match="was revoked by an admin"),
            running(loop) as thread,
        ):
            wait_for("the loop to give up", lambda: not thread.is_alive())


def test_without_an_enrollment_token_a_refused_own_token_is_fatal(
    master: Master, tmp_path: Path
) -> None:
    (tmp_path / "agent_token").write_text("not-the-agents-token\n")
    settings = agent_settings(master.url, tmp_path, token="", agent_id="agent-lost")
    with httpx.Client() as http:
        loop = AgentLoop(make_daemon(settings, http))
        assert loop.credential.token == "not-the-agents-token"
        with (
            pytest.raises(UnauthenticatedError, match="invalid agent token"),
            running(loop) as thread,
        ):
            wait_for("the loop to give up", lambda: not thread.is_alive())


def test_an_agent_without_any_token_does_not_start(tmp_path: Path) -> None:
    with pytest.raises(UnauthenticatedError, match="no agent token"):
        AgentCredential.load(tmp_path, "")


def test_a_token_that_cannot_be_stored_is_fatal_and_replaces_nothing(tmp_path: Path) -> None:
    (tmp_path / "agent_token" / "in-the-way").mkdir(parents=True)  # the rename must fail
    credential = AgentCredential(tmp_path, "enrollment", None)
    with pytest.raises(FailedPreconditionError, match="cannot be stored"):
        credential.adopt("issued")
    assert credential.token == "enrollment"
    assert [p.name for p in tmp_path.iterdir()] == ["agent_token"]  # no temporary file left
