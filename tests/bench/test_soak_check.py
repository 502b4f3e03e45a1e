"""The chaos soak's checker (``bench/soak.py``): journals against what the database stores.

Each broken promise is found from a journal and a database view written by hand; a consistent
pair passes. (The soak itself runs in ``tests/reliability/test_soak.py``.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.soak import SoakResult, Stored, check, read_journals

JOURNAL = """\
start 1 0
report 1 training 1
report 1 training 2
report 1 validation 2
ckpt 1 2 uuid-a
report 1 training 3
start 2 2
report 2 training 3
report 2 training 4
report 2 validation 4
ckpt 2 4 uuid-b
end 2
"""
"""Run 1 was killed after step 3 (never ended); run 2 resumed from its checkpoint of step 2."""


def _stored(**changes: object) -> Stored:
    reports = Counter(
        {
            (7, 1, "training", 1): 1,
            (7, 1, "training", 2): 1,
            (7, 1, "validation", 2): 1,
            (7, 2, "training", 3): 1,
            (7, 2, "training", 4): 1,
            (7, 2, "validation", 4): 1,
        }
    )
    stored = Stored("COMPLETED", [7], reports, Counter({"uuid-a": 1, "uuid-b": 1}))
    for key, value in changes.items():
        setattr(stored, key, value)
    return stored


def _findings(tmp_path: Path, stored: Stored, journal: str = JOURNAL) -> SoakResult:
    (tmp_path / "7.log").write_text(journal)
    result = SoakResult(database="sqlite", seconds=1.0)
    check(stored, read_journals(tmp_path), result)
    return result


def test_a_consistent_soak_passes(tmp_path: Path) -> None:
    result = _findings(tmp_path, _stored())
    assert result.problems == []
    assert (result.trials, result.runs, result.reports_flushed, result.checkpoints_acked) == (
        1,
        2,
        3,
        2,
    )


def test_a_report_stored_twice_is_found(tmp_path: Path) -> None:
    stored = _stored()
    stored.reports[(7, 2, "training", 4)] = 2
    assert _findings(tmp_path, stored).duplicated_reports == ["trial 7 run 2 training step 4 x2"]


def test_a_flushed_report_missing_is_lost_but_a_killed_run_s_is_not(tmp_path: Path) -> None:
    stored = _stored()
    del stored.reports[(7, 2, "validation", 4)]  # run 2 ended: it was acknowledged
    result = _findings(tmp_path, stored)
    assert result.lost_reports == ["trial 7 run 2 validation step 4"]
    stored = _stored()
    del stored.reports[(7, 1, "training", 2)]  # run 1 was killed: maybe never shipped
    assert _findings(tmp_path, stored).problems == []


def test_an_acknowledged_checkpoint_missing_is_lost(tmp_path: Path) -> None:
    result = _findings(tmp_path, _stored(checkpoints=Counter({"uuid-b": 1})))
    assert result.lost_checkpoints == ["trial 7 run 1 step 2"]


def test_a_run_that_resumes_before_its_checkpoint_repeats_steps(tmp_path: Path) -> None:
    journal = JOURNAL.replace("start 2 2", "start 2 0")
    result = _findings(tmp_path, _stored(), journal)
    assert result.repeated_steps == [
        "trial 7 run 2 resumed after step 0, though step 2 was checkpointed"
    ]


def test_an_experiment_that_did_not_complete_and_reused_ids_are_problems(tmp_path: Path) -> None:
    result = _findings(tmp_path, _stored(experiment_state="ERROR", trial_ids=[7, 7]))
    assert result.problems[0] == (
        "the experiment ended ERROR, not COMPLETED (trials: none; 0 allocations live; 0 trial "
        "exits not yet fed to the searcher)"
    )
    assert result.reused_ids == ["trial 7"]
