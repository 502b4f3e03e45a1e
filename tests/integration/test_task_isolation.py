"""Task code cannot read the cluster's secrets (docs/security.md, "Task isolation").

A real master and a real root agent run three experiments, one each for an admin, a non-admin,
and a non-admin linked to an agent user (``det user link-with-agent-user``). Each task runs
``probe.sh`` (a shell script: the task user may not be able to run the agent's Python here),
which says which uid it runs as, tries to read the master's database and home, the cluster's
agent token, the agent's home and the agent's own token, and writes a file where checkpoints go
(``/determined_shared_fs``, the master's default storage). What users rely on:

- a non-admin's task runs as the agent's unprivileged ``task_user`` (``nobody``), a linked
  user's as its linked uid, an admin's as the agent's own user (root);
- neither non-admin task can read any of those, and both can still write checkpoints;
- the agent token printed by the admin's task (which may read it) is masked in its served log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs a root agent")

PROBE = r"""\
set -u
out="uid=$(id -u) gid=$(id -g) groups=$(id -G | wc -w)"
for target in "$@"; do
    name=${target%%=*}
    path=${target#*=}
    if [ -d "$path" ]; then
        ls "$path" >/dev/null 2>&1 && out="$out $name=read" || out="$out $name=denied"
    elif cat "$path" >/dev/null 2>&1; then
        out="$out $name=read"
        [ "$name" = agent_token ] && echo "the agent token is $(cat "$path")"
    else
        out="$out $name=denied"
    fi
done
# a checkpoint-like write into the master's default storage, as the harness makes one
if [ "$(id -u)" != 0 ]; then
    mark="/determined_shared_fs/probe-$(id -u)"
    echo written >"$mark" && out="$out storage=written" || out="$out storage=refused"
fi
echo "PROBE $out"
"""

PASSWORD = "a-long-password"
LINKED_UID = 4242


def _config(targets: dict[str, str]) -> str:
    args = " ".join(f"{name}={path}" for name, path in targets.items())
    return (
        "name: isolation\n"
        f"entrypoint: sh probe.sh {args}\n"
        "resources:\n  slots_per_trial: 1\n"
        "searcher:\n  name: single\n  metric: loss\n"
    )


def _probe(api: Api, trial_id: int) -> dict[str, str]:
    for line in api.logs(trial_id).splitlines():
        if line.startswith("PROBE "):
            return dict(item.split("=", 1) for item in line.split()[1:])
    raise AssertionError(f"no PROBE line in the log of trial {trial_id}:\n{api.logs(trial_id)}")


def _user(admin: Api, name: str, link: dict[str, object] | None = None) -> Api:
    user: dict[str, object] = {"username": name, "admin": False, "active": True}
    if link is not None:
        user["agentUserGroup"] = link
    made = admin.http.post("/api/v1/users", json={"user": user, "password": PASSWORD})
    assert made.status_code == 200, made.text
    return Api(admin.url, name, PASSWORD)


def test_tasks_of_non_admins_cannot_read_the_cluster_secrets(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=3)
    home = local.home
    agent_home = local.agent_home("a1")
    targets = {
        "master_db": str(home / "master.db"),
        "agent_token": str(home / "agent_token"),  # the cluster's enrollment token
        "master_home": str(home),
        "agent_home": str(agent_home),
        "agents_own_token": str(agent_home / "agent_token"),
    }
    alice = _user(api, "alice")
    link = {"agentUid": LINKED_UID, "agentGid": LINKED_UID, "agentUser": "bob", "agentGroup": "bob"}
    linked = _user(api, "bob", link)
    files = {"probe.sh": PROBE}
    experiments = {
        "admin": api.create_experiment(_config(targets), files),
        "alice": alice.create_experiment(_config(targets), files),
        "bob": linked.create_experiment(_config(targets), files),
    }
    probes = {}
    for who, exp_id in experiments.items():
        exp = api.wait_state(exp_id, timeout=120)
        (trial,) = api.trials(exp_id)
        assert exp["state"] == "STATE_COMPLETED", (who, api.logs(trial["id"]))
        probes[who] = _probe(api, trial["id"])

    assert probes["alice"]["uid"] == "65534"  # nobody: the agent's default task_user
    assert (probes["bob"]["uid"], probes["bob"]["gid"]) == (str(LINKED_UID), str(LINKED_UID))
    for who in ("alice", "bob"):
        assert probes[who]["groups"] == "1", probes[who]  # its own group, no other
        for name in targets:
            assert probes[who][name] == "denied", (who, name, probes[who])
        # ... yet it writes checkpoints into the master's default storage
        assert probes[who]["storage"] == "written", probes[who]
        assert (home / "checkpoints" / f"probe-{probes[who]['uid']}").read_text() == "written\n"
    # An admin's task runs as the agent's user, as Determined runs it; it may read the token,
    # but the line that printed it is served masked.
    assert probes["admin"]["uid"] == "0"
    assert probes["admin"]["agent_token"] == "read"
    token = (home / "agent_token").read_text().strip()
    (admin_trial,) = api.trials(experiments["admin"])
    admin_log = api.logs(admin_trial["id"])
    assert "the agent token is ********" in admin_log
    assert token not in admin_log
    # Nothing the master keeps in its home is open to others.
    assert oct((home / "master.db").stat().st_mode & 0o777) == oct(0o600)
    assert oct(home.stat().st_mode & 0o777) == oct(0o700)
    assert oct(agent_home.stat().st_mode & 0o077) == oct(0)
    alice.close()
    linked.close()


def test_a_task_user_that_does_not_exist_stops_the_agent_with_a_message(tmp_path: Path) -> None:
    """An agent is never started that would run tasks as a user its node lacks."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stalwart",
            "agent",
            "--master",
            "http://127.0.0.1:9",
            "--token",
            "x" * 16,
            "--home",
            str(tmp_path / "agent"),
            "--task-user",
            "no-such-user-here",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "no user 'no-such-user-here' on this node" in done.stderr + done.stdout
