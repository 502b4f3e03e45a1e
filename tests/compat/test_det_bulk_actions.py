"""Bulk experiment actions of a project with the official 0.38.1 client library, on Stalwart.

The web UI's multi-select actions are the generated ``bindings`` calls
``post_{Activate,Pause,Cancel,Kill,Archive,Unarchive}Experiments`` and
``delete_DeleteExperiments`` (0.38.1's ``det`` has no command for them);
``workflows/bindings_calls.py`` runs them over the client's own logged-in session, so each
test proves the client parses the answer: one ``{id, error}`` per experiment, an empty error
meaning done. The UI's per-user settings (``get_GetUserSetting``, ``post_PostUserSetting``,
``post_ResetUserSetting``) are proven here too. One master, no agent: three experiments created
paused (their trials stay queued).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Det, MasterProcess, describe, logged_in_admin
from tests.compat.test_det_workflows import WORKFLOWS, _config, _created_id, _wait_state

pytestmark = pytest.mark.compat

PROJECT = 1  # Uncategorized
MEMBER_PASSWORD = "Long-password-1"


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


def calls(
    cli: Det, *specs: dict[str, Any], user: str = "admin", password: str = ""
) -> list[dict[str, Any]]:
    """Run bindings calls as ``user``: each ``{"ok": parsed answer}`` or
    ``{"status": HTTP status, "error": message}`` (see ``workflows/bindings_calls.py``)."""
    done = subprocess.run(
        [
            str(cli.executable.parent / "python"),
            str(WORKFLOWS / "bindings_calls.py"),
            cli.master.url,
            user,
            password,
            json.dumps(list(specs)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(cli.env),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, describe(done)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("CALLS_RESULT "))
    results: list[dict[str, Any]] = json.loads(line.removeprefix("CALLS_RESULT "))
    return results


def bulk(
    action: str,
    ids: list[int],
    *,
    filters: dict[str, Any] | None = None,
    project: int = PROJECT,
) -> dict[str, Any]:
    """The spec of one bulk call (``Activate``, ``Pause``... ``Delete``)."""
    body: dict[str, Any] = {"experimentIds": ids, "projectId": project}
    if filters is not None:
        body["filters"] = filters
    method = "delete" if action == "Delete" else "post"
    return {
        "fn": f"{method}_{action}Experiments",
        "kwargs": {"projectId": project},
        "body": {"type": f"v1{action}ExperimentsRequest", "json": body},
    }


def outcome(result: dict[str, Any]) -> dict[int, str]:
    """``{experiment id: error}`` of one bulk answer."""
    assert "ok" in result, result
    return {r["id"]: r["error"] for r in result["ok"]["results"]}


def get_experiment(exp_id: int) -> dict[str, Any]:
    return {"fn": "get_GetExperiment", "kwargs": {"experimentId": exp_id}}


@pytest.fixture(scope="module")
def exps(admin: Det, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Three paused experiments: bulk-a, bulk-b, bulk-c."""
    model = tmp_path_factory.mktemp("bulk-model")
    (model / "trial.py").write_text((WORKFLOWS / "trial.py").read_text(), encoding="utf-8")
    made = {}
    for name in ("bulk-a", "bulk-b", "bulk-c"):
        config = _config(model.parent, name, steps=1, sleep=0.0)
        made[name] = _created_id(admin.ok("experiment", "create", config, str(model), "--paused"))
    return made


def test_state_actions_by_ids_and_by_filters(admin: Det, exps: dict[str, int]) -> None:
    a, b, c = exps["bulk-a"], exps["bulk-b"], exps["bulk-c"]
    activated, paused, elsewhere, got_a, got_b = calls(
        admin,
        bulk("Activate", [a, b, 99999]),
        bulk("Pause", [], filters={"name": "BULK-A"}),  # filters: case-insensitive, ids ignored
        bulk("Activate", [c], project=4242),
        get_experiment(a),
        get_experiment(b),
    )
    assert outcome(activated) == {a: "", b: "", 99999: "experiment '99999' not found"}
    assert outcome(paused) == {a: ""}  # only active ones: b is left alone by the name
    assert outcome(elsewhere) == {c: f"experiment '{c}' not found"}  # not in that project
    assert got_a["ok"]["experiment"]["state"] == "STATE_PAUSED"
    assert got_b["ok"]["experiment"]["state"] in ("STATE_ACTIVE", "STATE_QUEUED")  # no agent


@pytest.fixture(scope="module")
def member(admin: Det) -> str:
    """A user with the default (member) role, who owns nothing."""
    admin.ok("user", "create", "bulk-member", "--password", MEMBER_PASSWORD)
    return "bulk-member"


def test_only_experiments_the_caller_may_change(
    admin: Det, exps: dict[str, int], member: str
) -> None:
    (killed,) = calls(admin, bulk("Kill", [exps["bulk-c"]]), user=member, password=MEMBER_PASSWORD)
    assert outcome(killed) == {exps["bulk-c"]: f"experiment '{exps['bulk-c']}' not found"}
    (unchanged,) = calls(admin, get_experiment(exps["bulk-c"]))
    assert unchanged["ok"]["experiment"]["state"] == "STATE_PAUSED"


def test_kill_archive_unarchive_delete(admin: Det, exps: dict[str, int]) -> None:
    a, b, c = exps["bulk-a"], exps["bulk-b"], exps["bulk-c"]
    (killed,) = calls(admin, bulk("Kill", [a, b]))
    assert outcome(killed) == {a: "", b: ""}
    for exp_id in (a, b):
        _wait_state(admin, exp_id, "STATE_CANCELED")
    canceled, paused, archived, again, hidden, unarchived, deleted, gone = calls(
        admin,
        bulk("Cancel", [a]),  # already over: done
        bulk("Pause", [a]),
        bulk("Archive", [a, c]),
        bulk("Archive", [a]),
        bulk("Activate", [a]),  # archived experiments take no state action
        bulk("Unarchive", [], filters={"name": "bulk-"}),  # filters pick archived, ended ones
        bulk("Delete", [b, c]),
        get_experiment(b),
    )
    assert outcome(canceled) == {a: ""}
    assert outcome(paused) == {a: "experiment in terminal state"}
    archive = outcome(archived)
    assert archive[a] == ""
    assert archive[c].startswith("Experiment is not in terminal state.")
    assert outcome(again) == {a: "Experiment is already archived."}
    assert outcome(hidden) == {a: f"experiment '{a}' not found"}
    assert outcome(unarchived) == {a: ""}
    deletion = outcome(deleted)
    assert deletion[b] == ""
    assert "cannot delete experiment in STATE_PAUSED state" in deletion[c]
    assert gone["status"] == 404


def _settings(*items: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "fn": "post_PostUserSetting",
        "body": {
            "type": "v1PostUserSettingRequest",
            "json": {"settings": [{"storagePath": p, "key": k, "value": v} for p, k, v in items]},
        },
    }


def test_user_web_settings_are_each_users_own(admin: Det, member: str) -> None:
    get = {"fn": "get_GetUserSetting"}
    *stored, mine = calls(
        admin,
        _settings(("experiments", "columns", '["id","name"]'), ("", "pinned", "1")),
        _settings(("experiments", "columns", '["id"]')),  # the same key again: replaced
        get,
    )
    (also,) = calls(admin, _settings(("", "pinned", "7")), user=member, password=MEMBER_PASSWORD)
    assert all("ok" in r for r in [*stored, also]), stored
    assert mine["ok"]["settings"] == [
        {"key": "pinned", "value": "1", "storagePath": ""},
        {"key": "columns", "value": '["id"]', "storagePath": "experiments"},
    ]
    removed, after, reset, empty = calls(
        admin,
        _settings(("", "pinned", "")),  # an empty value removes the setting
        get,
        {"fn": "post_ResetUserSetting"},
        get,
    )
    assert "ok" in removed, removed
    assert "ok" in reset, reset
    assert [s["key"] for s in after["ok"]["settings"]] == ["columns"]
    assert empty["ok"]["settings"] == []
    (kept,) = calls(admin, get, user=member, password=MEMBER_PASSWORD)
    assert kept["ok"]["settings"] == [{"key": "pinned", "value": "7", "storagePath": ""}]
