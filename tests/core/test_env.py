"""TaskEnv: the task contract read from a mapping (and rendezvous.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stalwart.core.env import (
    Rendezvous,
    TaskEnv,
    TaskEnvError,
    canonical_master_url,
    current,
    torch_launcher_env,
)

BASE = {
    "DET_MASTER": "master.example:8080",
    "DET_CLUSTER_ID": "c1",
    "DET_AGENT_ID": "a1",
    "DET_SLOT_IDS": "[0, 1]",
    "DET_TASK_ID": "3.req",
    "DET_ALLOCATION_ID": "3.req.1",
    "DET_SESSION_TOKEN": "tok",
    "DET_TASK_TYPE": "TRIAL",
    "DET_TRIAL_ID": "7",
    "DET_EXPERIMENT_ID": "3",
    "DET_TRIAL_RUN_ID": "2",
    "DET_TRIAL_SEED": "42",
    "DET_HPARAMS": '{"lr": 0.1}',
    "DET_EXPERIMENT_CONFIG": '{"searcher": {"name": "single"}}',
    "DET_STEPS_COMPLETED": "100",
}


def test_not_in_a_task() -> None:
    assert TaskEnv.from_environ({}) is None
    assert TaskEnv.from_environ({"DET_MASTER": "http://m:8080"}) is None  # a CLI user's shell


def test_a_trial_task() -> None:
    env = TaskEnv.from_environ({**BASE, "DET_RESOURCES_ID": "r1", "DET_LATEST_CHECKPOINT": "u"})
    assert env is not None
    assert env.master_url == "http://master.example:8080"
    assert env.slot_ids == (0, 1)
    assert env.container_id == "r1"
    assert env.latest_checkpoint == "u"
    assert env.user is None
    assert env.rendezvous is None
    assert env.trial is not None
    assert (env.trial.trial_id, env.trial.trial_run_id, env.trial.steps_completed) == (7, 2, 100)
    assert env.trial.hparams == {"lr": 0.1}
    assert env.trial.config == {"searcher": {"name": "single"}}
    assert env.reports_spool is None  # not under Stalwart's agent


def test_the_reports_spool_of_stalwart_s_agent() -> None:
    env = TaskEnv.from_environ({**BASE, "STALWART_REPORTS_SPOOL": "/run/x/reports"})
    assert env is not None
    assert env.reports_spool == Path("/run/x/reports")


def test_every_problem_is_named_at_once() -> None:
    broken = {**BASE, "DET_TRIAL_ID": "x", "DET_HPARAMS": "[1]", "DET_SLOT_IDS": '["gpu"]'}
    del broken["DET_SESSION_TOKEN"]
    with pytest.raises(TaskEnvError) as info:
        TaskEnv.from_environ(broken)
    message = str(info.value)
    for part in (
        "DET_SESSION_TOKEN is not set",
        "DET_TRIAL_ID is not an integer",
        "DET_HPARAMS is not a JSON object",
        "DET_SLOT_IDS has a slot id that is not an integer",
    ):
        assert part in message


def test_non_trial_tasks_need_no_trial_variables() -> None:
    env = TaskEnv.from_environ(
        {k: v for k, v in BASE.items() if not k.startswith(("DET_TRIAL", "DET_EXP", "DET_H"))}
        | {"DET_TASK_TYPE": "COMMAND"}
    )
    assert env is not None
    assert env.trial is None
    assert not env.is_trial


def test_rendezvous_from_the_run_dir(tmp_path: Path) -> None:
    info = tmp_path / "info"
    info.mkdir()
    (info / "rendezvous.json").write_text(
        json.dumps(
            {
                "container_addrs": ["10.0.0.1", "10.0.0.2"],
                "container_rank": 1,
                "container_slot_counts": [2, 2],
            }
        )
    )
    env = TaskEnv.from_environ({**BASE, "DET_RUN_DIR": str(tmp_path)})
    assert env is not None
    assert env.run_dir == tmp_path
    assert env.rendezvous == Rendezvous(("10.0.0.1", "10.0.0.2"), 1, (2, 2))
    (info / "rendezvous.json").write_text("{}")
    with pytest.raises(TaskEnvError, match=r"rendezvous\.json is malformed"):
        TaskEnv.from_environ({**BASE, "DET_RUN_DIR": str(tmp_path)})


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("localhost", "http://localhost:8080"),
        ("http://m:9000/", "http://m:9000"),
        ("https://m", "https://m:8080"),
        ("[::1]", "http://[::1]:8080"),
        ("m:80/prefix/", "http://m:80/prefix"),
    ],
)
def test_canonical_master_url(given: str, canonical: str) -> None:
    assert canonical_master_url(given) == canonical


def test_current_reads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    current.cache_clear()
    try:
        for key, value in BASE.items():
            monkeypatch.setenv(key, value)
        first = current()
        monkeypatch.setenv("DET_TRIAL_ID", "8")
        assert current() is first
    finally:
        current.cache_clear()


def test_torch_launcher_env() -> None:
    env = torch_launcher_env(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1",
        }
    )
    assert (env.rank, env.size, env.local_rank, env.local_size) == (3, 4, 1, 2)
    assert (env.cross_rank, env.cross_size) == (1, 2)
    with pytest.raises(KeyError):
        torch_launcher_env({})
