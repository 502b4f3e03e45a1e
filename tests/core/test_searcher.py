"""The 0.38 searcher shim: one op of searcher.max_length; progress posted; missing max_length."""

from __future__ import annotations

import pytest

from stalwart.core import (
    DummyDistributedContext,
    LocalSearcherContext,
    SearcherContextMissing,
    TaskEnv,
    Unit,
)
from stalwart.core._context import build_context
from stalwart.core._searcher import SearcherContext, parse_max_length, parse_units
from stalwart.master.db.tables import Trial
from tests.core.conftest import CONFIG, FAST_RETRY, MasterServer, new_trial


def test_one_operation_of_max_length_reports_progress(master: MasterServer) -> None:
    env = new_trial(master, CONFIG + "  max_length:\n    batches: 200\n")
    assert env.trial is not None
    with build_context(env, retry=FAST_RETRY) as ctx:
        assert ctx.searcher.get_configured_units() is Unit.BATCHES
        ops = ctx.searcher.operations()
        with pytest.warns(FutureWarning, match=r"deprecated in Determined 0\.38\.0"):
            op = next(ops)
        assert op.length == 200
        op.report_progress(50)
        op.report_completed(0.1)
        with pytest.raises(RuntimeError, match=r"only call op\.report_completed"):
            op.report_completed(0.1)
        assert list(ops) == []
    with master.state.sessions() as session:
        trial = session.get(Trial, env.trial.trial_id)
        assert trial is not None
        assert trial.progress == 0.25


def test_the_op_must_be_completed() -> None:
    searcher = SearcherContext(DummyDistributedContext(), 10, lambda _: None)
    with pytest.warns(FutureWarning), pytest.raises(RuntimeError, match="report_completed"):
        for _op in searcher.operations():
            pass


def test_without_max_length(master: MasterServer, trial_env: TaskEnv) -> None:
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        assert isinstance(ctx.searcher, SearcherContextMissing)
        with pytest.raises(ValueError, match="SearcherContext was not created because"):
            ctx.searcher.operations()


def test_local_searcher_yields_one_op_of_length_1() -> None:
    searcher = LocalSearcherContext(DummyDistributedContext())
    ops = searcher.operations()
    with pytest.warns(FutureWarning):
        op = next(ops)
    assert op.length == 1
    op.report_progress(1)
    op.report_completed(0.0)
    assert list(ops) == []


def test_parse_max_length_and_units() -> None:
    assert parse_max_length({"searcher": {"max_length": 5}}) == 5
    assert parse_max_length({"searcher": {"max_length": {"epochs": 3}}}) == 3
    assert parse_max_length({"searcher": {}}) is None
    assert parse_max_length({}) is None
    with pytest.raises(ValueError, match="max_length"):
        parse_max_length({"searcher": {"max_length": "long"}})
    assert parse_units({"searcher": {"max_length": {"records": 3}}}) is Unit.RECORDS
    assert parse_units({"searcher": {"max_length": 3}}) is None
