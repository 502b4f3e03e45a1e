"""The searcher state the master stores (``experiments.searcher_state``) stays small however
many trials a search has run (issue 25): every round of
:func:`~stalwart.master.cluster.search.drive` loads and saves a snapshot that has a row per live
trial and a few counts."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from stalwart.master.app import open_state
from stalwart.master.cluster.lifecycle import complete_trial, fail_trial
from stalwart.master.cluster.search import drive
from stalwart.master.db.tables import Experiment, Trial
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.state import MasterState
from tests.master.cluster.test_loop import SINGLE, _create
from tests.master.conftest import make_settings

RANDOM = SINGLE.replace(
    "  name: single\n", "  name: random\n  max_trials: 400\n  max_concurrent_trials: 8\n"
).replace("  lr: 0.1\n", "  lr:\n    type: double\n    minval: 0.0001\n    maxval: 0.1\n")


@pytest.fixture
def state(tmp_path: Path) -> Iterator[MasterState]:
    st = open_state(make_settings(tmp_path / "home", cluster={"agent_timeout": 60}))
    try:
        yield st
    finally:
        st.engine.dispose()


def _round(state: MasterState, exp_id: int, rng: random.Random) -> tuple[int, int, str]:
    """End the experiment's running trials (a few errored; one validates as it ends, its report
    read by the searcher after the exit), drive its searcher once; the stored state's size."""
    with state.step() as session:
        experiment = session.get(Experiment, exp_id)
        assert experiment is not None
        running = list(
            session.scalars(
                select(Trial).where(Trial.experiment_id == exp_id, Trial.state == "ACTIVE")
            )
        )
        for trial in running:
            if rng.random() < 0.05:
                fail_trial(session, trial)
            else:
                complete_trial(session, trial)
        if running:
            report = MetricsInput(
                trial_id=running[0].id,
                run_id=running[0].run_id,
                group="validation",
                steps_completed=10,
                avg_metrics={"loss": 0.5},
            )
            report_metrics_many(session, [report])
        drive(session, experiment)
        session.commit()
        size = len(json.dumps(experiment.searcher_state))
        return size, len(running), experiment.state


def test_the_stored_searcher_state_stays_small_over_hundreds_of_trials(
    state: MasterState,
) -> None:
    exp_id = _create(state, RANDOM)
    rng = random.Random(0)
    sizes: list[int] = []
    ended = 0
    for _ in range(200):
        size, n, exp_state = _round(state, exp_id, rng)
        sizes.append(size)
        ended += n
        if exp_state != "ACTIVE":
            break
    assert exp_state in ("STOPPING_COMPLETED", "COMPLETED")
    assert ended == 400
    with state.sessions() as session:
        trials = list(session.scalars(select(Trial).where(Trial.experiment_id == exp_id)))
        experiment = session.get(Experiment, exp_id)
        assert experiment is not None
        assert experiment.searcher_state is not None
        snapshot = experiment.searcher_state["snapshot"]
    assert len(trials) == 400
    assert snapshot["version"] == 2
    assert snapshot["trials"] == []
    [group] = snapshot["groups"]
    assert group["created"] == 400
    assert sum(group["exited"].values()) == 400
    assert group["exited"]["ERRORED"] == sum(t.state == "ERROR" for t in trials)
    # a row per live trial (8) and counts: about the same size after 8 trials as after 390
    # (digits of the counts and the cursor, an "ERRORED" count once one errs); version 1 added a
    # row of about 70 characters per trial ever created
    steady = sizes[1:-2]
    assert max(steady) - min(steady) <= 40, sizes
    assert max(sizes) < 2_500, sizes


def test_an_exit_and_a_validation_read_the_live_trials_not_every_trial_ever_made(
    state: MasterState,
) -> None:
    """What each exit (the searcher's drive) and each validation (the experiment's best trial)
    read of an experiment goes through indexes that find its live trials, its exits to feed
    and its best value (migration 0022), not through every trial it ever had: a search of
    10,000 trials paid 4-5 ms a query for that (B1, issue 25). Checked on SQLite's plans."""
    if state.engine.dialect.name != "sqlite":
        pytest.skip("query plans are checked on SQLite")
    exp_id = _create(state, RANDOM)
    rng = random.Random(1)
    for _ in range(12):  # about a hundred trials made
        _round(state, exp_id, rng)
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM trials" in statement:
            seen.append((statement, params))

    event.listen(state.engine, "before_cursor_execute", record)
    try:
        _round(state, exp_id, rng)
    finally:
        event.remove(state.engine, "before_cursor_execute", record)
    assert len(seen) >= 3
    with state.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        for statement, params in seen:
            plan = [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + statement, params)]
            every_trial = [
                step
                for step in plan
                if step.startswith("SCAN trials") or "ix_trials_experiment_id " in step
            ]
            assert not every_trial, (statement, plan)
