"""The SDK's access tokens, job queue and historical usage against a real master and agent."""

from __future__ import annotations

import csv
import datetime as dt
import io
import time
from pathlib import Path

import pytest

from stalwart.client import Client, Experiment
from stalwart.errors import ForbiddenError, InvalidArgumentError, UnauthenticatedError
from stalwart.local import LocalCluster


def test_tokens_sign_in_until_revoked(admin: Client, cluster: LocalCluster, tmp_path: Path) -> None:
    admin.create_user("tess", password="Tess-pass-1")
    with Client(cluster.url, "tess", "Tess-pass-1", config_dir=tmp_path / "t", environ={}) as tess:
        token_id, token = tess.create_token(expiration_days=3, description="ci")
        (info,) = [t for t in tess.list_tokens() if t.id == token_id]
        assert info.description == "ci"
        assert not info.revoked
        assert tess.edit_token(token_id, "nightly").description == "nightly"
        with pytest.raises(ForbiddenError):
            tess.create_token("admin")
    with Client(cluster.url, config_dir=tmp_path / "fresh", environ={}) as fresh:
        assert fresh.login_with_token(token).username == "tess"
        assert fresh.whoami().username == "tess"
        assert fresh.token_store.active_user(fresh.master) == "tess"
    env = {"DET_USER": "tess", "DET_USER_TOKEN": token}
    with Client(cluster.url, config_dir=tmp_path / "env", environ=env) as from_env:
        assert from_env.whoami().username == "tess"
    assert token_id in [t.id for t in admin.list_tokens("tess")]
    assert admin.revoke_token(token_id).revoked
    late = Client(cluster.url, config_dir=tmp_path / "late", environ={})
    with late, pytest.raises(UnauthenticatedError, match=f"access token {token_id} was revoked"):
        late.login_with_token(token)
    gone = [t for t in admin.list_tokens("tess", show_inactive=True) if t.id == token_id]
    assert gone[0].revoked


def test_the_job_queue_lists_and_updates(admin: Client) -> None:
    task = admin.launch_command("sleep 60", {"resources": {"slots": 0}})
    try:
        deadline = time.monotonic() + 30
        while not [j for j in admin.list_jobs() if j.job_id == task.id]:
            assert time.monotonic() < deadline, "the command never reached the queue"
            time.sleep(0.2)
        admin.update_job(task.id, priority=7)
        (job,) = [j for j in admin.list_jobs() if j.job_id == task.id]
        assert job.priority == 7
        assert job.type == "TYPE_COMMAND"
        with pytest.raises(InvalidArgumentError, match="fair_share"):
            admin.update_job(task.id, weight=2)
    finally:
        admin.kill_task(task.id)


def test_usage_counts_a_finished_experiment(admin: Client, finished: Experiment) -> None:
    now = dt.datetime.now(dt.UTC)
    after = (now - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = (now + dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entries = [e for e in admin.usage_raw(after, before) if e.experiment_id == finished.id]
    assert entries
    assert entries[0].kind == "experiment"
    rows = list(csv.DictReader(io.StringIO(admin.usage_csv(after, before))))
    assert [r for r in rows if r["experiment_id"] == str(finished.id)]
    assert "pull_seconds" in rows[0]
    days = admin.usage_aggregated(
        (now - dt.timedelta(hours=1)).date().isoformat(), now.date().isoformat()
    )
    assert sum(d.seconds for d in days) > 0
