"""Real experiments on a real master and real agents, run to the end.

Each test starts ``stalwart master`` and ``stalwart agent`` processes (:class:`LocalCluster`),
creates experiments through the REST API with the Core API script ``trials/train.py`` as model
definition, and checks what users rely on: trial states, metrics, checkpoints and logs.
"""

from __future__ import annotations

import time
from pathlib import Path

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import MASTER_CONFIG, free_port, trial_files


def _config(searcher: str, hparams: str, **extra: str) -> str:
    lines = [
        "name: it",
        "entrypoint: python3 train.py",
        "resources:",
        "  slots_per_trial: 1",
        "hyperparameters:",
        hparams,
        "searcher:",
        searcher,
    ]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


SINGLE = "  name: single\n  metric: loss\n  smaller_is_better: true"


def _steps(api: Api, trial_id: int, group: str = "training") -> list[int]:
    return [int(m["totalBatches"]) for m in api.metrics(trial_id, group)]


def test_single_experiment_runs_to_completion(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    hp = "  steps: 6\n  period: 2\n  x: 0.5"
    exp_id = api.create_experiment(_config(SINGLE, hp), trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_COMPLETED"
    assert _steps(api, trial["id"]) == [1, 2, 3, 4, 5, 6]
    assert _steps(api, trial["id"], "validation") == [2, 4, 6]
    assert "training done" in api.logs(trial["id"])
    # checkpoint GC keeps the latest and the best of the trial (Determined's defaults)
    kept = [c for c in api.checkpoints(exp_id) if c["state"] == "STATE_COMPLETED"]
    assert {int(c["metadata"]["steps_completed"]) for c in kept} == {6}


def test_grid_and_random_searches_run_every_trial(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=2)
    grid = api.create_experiment(
        _config(
            "  name: grid\n  metric: loss\n  max_concurrent_trials: 2",
            "  steps: 2\n  period: 2\n  x:\n    type: categorical\n    vals: [0.1, 0.5, 0.9]",
        ),
        trial_files("train.py"),
    )
    random = api.create_experiment(
        _config(
            "  name: random\n  metric: loss\n  max_trials: 3\n  max_concurrent_trials: 2",
            "  steps: 2\n  period: 2\n  x:\n    type: double\n    minval: 0\n    maxval: 1",
        ),
        trial_files("train.py"),
    )
    for exp_id in (grid, random):
        assert api.wait_state(exp_id, timeout=120)["state"] == "STATE_COMPLETED"
    grid_trials = api.trials(grid)
    assert sorted(t["hparams"]["x"] for t in grid_trials) == [0.1, 0.5, 0.9]
    random_trials = api.trials(random)
    assert len(random_trials) == 3
    assert len({t["hparams"]["x"] for t in random_trials}) == 3
    for trial in grid_trials + random_trials:
        assert trial["state"] == "STATE_COMPLETED"
        assert _steps(api, trial["id"]) == [1, 2]


def test_adaptive_asha_stops_trials_early_and_finds_the_best(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=2)
    searcher = (
        "  name: adaptive_asha\n  metric: loss\n  smaller_is_better: true\n"
        "  time_metric: batches\n  max_time: 16\n  max_trials: 6\n  max_concurrent_trials: 2\n"
        "  divisor: 4\n  max_rungs: 3\n  mode: aggressive"
    )
    hp = "  steps: 16\n  period: 1\n  x:\n    type: double\n    minval: 0\n    maxval: 1"
    exp_id = api.create_experiment(_config(searcher, hp), trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=180)
    assert exp["state"] == "STATE_COMPLETED"
    trials = api.trials(exp_id)
    assert len(trials) == 6
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    lengths = {t["id"]: max(_steps(api, t["id"])) for t in trials}
    assert any(n < 16 for n in lengths.values()), lengths  # stopped early by the searcher
    assert any(n == 16 for n in lengths.values()), lengths  # someone trained to the end
    best = min(trials, key=lambda t: t["bestValidation"]["metrics"]["avgMetrics"]["loss"])
    detail = api.experiment(exp_id)
    assert detail["bestTrialId"] == best["id"]  # the best trial found is the one shown
    assert detail["progress"] == 1.0


def test_failed_trial_restarts_from_its_checkpoint(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    hp = "  steps: 8\n  period: 2\n  fail_at: 5"
    exp_id = api.create_experiment(_config(SINGLE, hp), trial_files("train.py"))
    assert api.wait_state(exp_id, timeout=90)["state"] == "STATE_COMPLETED"
    (trial,) = api.trials(exp_id)
    assert trial["restarts"] == 1
    logs = api.logs(trial["id"])
    assert "failing on purpose at step 5" in logs
    assert "restarting from its latest checkpoint (restart 1 of 5)" in logs
    assert "resumed from step 4" in logs
    # the reports of the failed run beyond its checkpoint were superseded by the new run
    assert _steps(api, trial["id"]) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_trial_errors_once_its_restarts_are_used(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    hp = "  steps: 4\n  period: 2\n  fail_at: 1\n  fail_always: true"
    exp_id = api.create_experiment(_config(SINGLE, hp, max_restarts="1"), trial_files("train.py"))
    assert api.wait_state(exp_id, timeout=90)["state"] == "STATE_ERROR"
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_ERROR"
    assert trial["restarts"] == 1
    assert "has used its 1 restarts: ERROR" in api.logs(trial["id"])


def test_pause_and_activate_resume_from_the_checkpoint(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    hp = "  steps: 200\n  period: 2\n  sleep: 0.05"
    exp_id = api.create_experiment(_config(SINGLE, hp), trial_files("train.py"))
    trial_id = api.wait_until(
        lambda: [t["id"] for t in api.trials(exp_id) if _steps(api, t["id"], "validation")],
        timeout=60,
        what="a first validation",
    )[0]
    api.post(f"/api/v1/experiments/{exp_id}/pause")
    api.wait_until(
        lambda: "preempted after step" in api.logs(trial_id), timeout=30, what="preemption"
    )
    api.wait_until(
        lambda: (
            api.trials(exp_id)[0]["state"] == "STATE_PAUSED"
            and "is PAUSED: its run ended" in api.logs(trial_id)
        ),
        timeout=30,
        what="the paused trial's run to end",
    )
    paused_at = max(_steps(api, trial_id, "validation"))
    api.post(f"/api/v1/experiments/{exp_id}/activate")
    api.wait_until(
        lambda: f"resumed from step {paused_at}" in api.logs(trial_id),
        timeout=60,
        what="the resumed run",
    )
    api.post(f"/api/v1/experiments/{exp_id}/kill")
    assert api.wait_state(exp_id, timeout=60)["state"] == "STATE_CANCELED"


def test_kill_stops_a_running_experiment(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    hp = "  steps: 100000\n  period: 1000\n  sleep: 0.01"
    exp_id = api.create_experiment(_config(SINGLE, hp), trial_files("train.py"))
    api.wait_until(
        lambda: (
            [t for t in api.trials(exp_id) if t["state"] == "STATE_RUNNING"]
            or [t for t in api.trials(exp_id) if _steps(api, t["id"])]
        ),
        timeout=60,
        what="a running trial",
    )
    started = time.monotonic()
    api.post(f"/api/v1/experiments/{exp_id}/kill")
    exp = api.wait_state(exp_id, timeout=30)
    assert exp["state"] == "STATE_CANCELED"
    assert time.monotonic() - started < 20
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_CANCELED"


def test_two_agents_share_a_two_slot_trial(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    local.start_agent("a2", slots=1)
    config = (
        "name: it-ranks\nentrypoint: python3 ranks.py\nresources:\n  slots_per_trial: 2\n"
        f"hyperparameters:\n  x: 1\nsearcher:\n{SINGLE}\n"
    )
    exp_id = api.create_experiment(config, trial_files("ranks.py"))
    assert api.wait_state(exp_id, timeout=90)["state"] == "STATE_COMPLETED"
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial["id"])
    lines = sorted(line for line in logs.splitlines() if line.startswith("container rank="))
    assert len(lines) == 2, logs
    assert lines[0].startswith("container rank=0 of 2")
    assert lines[1].startswith("container rank=1 of 2")
    agents = {line.split(" on agent ")[1].split()[0] for line in lines}
    assert agents == {"a1", "a2"}


def test_master_sigkill_loses_no_metric_report(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    hp = "  steps: 60\n  period: 10\n  sleep: 0.1"
    exp_id = api.create_experiment(_config(SINGLE, hp), trial_files("train.py"))
    trial_id = api.wait_until(
        lambda: [t["id"] for t in api.trials(exp_id) if len(_steps(api, t["id"])) >= 5],
        timeout=60,
        what="a trial with metrics",
    )[0]
    local.kill_master()
    time.sleep(2.0)  # the trial keeps training and reporting into the void
    local.start_master()
    api2 = Api(local.url)
    try:
        exp = api2.wait_state(exp_id, timeout=120)
        assert exp["state"] == "STATE_COMPLETED"
        (trial,) = api2.trials(exp_id)
        assert trial["restarts"] == 0  # the trial was never killed or restarted
        assert _steps(api2, trial_id) == list(range(1, 61))
    finally:
        api2.close()


def test_a_search_runs_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    config = tmp_path / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(
        home=tmp_path / "home", port=free_port(), db=pg_url, master_config=config
    )
    cluster.start_master()
    try:
        cluster.start_agent("a1", slots=2)
        api = Api(cluster.url)
        searcher = "  name: random\n  metric: loss\n  max_trials: 3\n  max_concurrent_trials: 2"
        hp = "  steps: 4\n  period: 2\n  x:\n    type: double\n    minval: 0\n    maxval: 1"
        exp_id = api.create_experiment(_config(searcher, hp), trial_files("train.py"))
        assert api.wait_state(exp_id, timeout=120)["state"] == "STATE_COMPLETED"
        trials = api.trials(exp_id)
        assert len(trials) == 3
        for trial in trials:
            assert _steps(api, trial["id"]) == [1, 2, 3, 4]
        assert not (tmp_path / "home" / "master.db").exists()  # nothing went to SQLite
        api.close()
    finally:
        cluster.stop()
