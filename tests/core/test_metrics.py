"""MetricsShipper over a scripted master: batching what is queued, order, 413 splits, errors,
flushes (and a checkpoint reported only after the metrics before it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart import errors
from stalwart.core import DummyDistributedContext
from stalwart.core._checkpoint import CheckpointContext
from stalwart.core._client import RetryPolicy, Session
from stalwart.core._metrics import MetricsShipper, prepare_report
from stalwart.core._storage import DirectoryStorage
from stalwart.core._train import TrainContext

FAST = RetryPolicy(initial_backoff_s=0.001, max_backoff_s=0.01, deadline_s=5.0)
WAIT_S = 10.0


def shipper_over(
    handler: Callable[[httpx.Request], httpx.Response], **kw: Any
) -> tuple[MetricsShipper, Session]:
    session = Session("http://m:8080", "tok", retry=FAST, transport=httpx.MockTransport(handler))
    return MetricsShipper(session, trial_id=7, trial_run_id=2, **kw), session


def steps(request: httpx.Request) -> list[int]:
    return [r["metrics"]["stepsCompleted"] for r in json.loads(request.content)["reports"]]


def test_what_is_queued_goes_in_one_post_in_order() -> None:
    posts: list[list[int]] = []
    first_seen = threading.Event()
    release = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/trials/metrics/batch"
        posts.append(steps(request))
        first_seen.set()
        assert release.wait(WAIT_S)
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler)
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    assert first_seen.wait(WAIT_S)  # the first post is in flight; the rest queue up
    for step in range(2, 6):
        shipper.publish(prepare_report("training", step, {"loss": 1.0 / step}))
    release.set()
    shipper.close()
    session.close()
    assert posts == [[1], [2, 3, 4, 5]]


def test_wire_shape() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler)
    shipper.publish(prepare_report("validation", 3, {"acc": float("nan")}, None))
    shipper.close()
    session.close()
    report = bodies[0]["reports"][0]
    assert report["group"] == "validation"
    assert report["metrics"]["trialId"] == 7
    assert report["metrics"]["trialRunId"] == 2
    assert report["metrics"]["stepsCompleted"] == 3
    assert report["metrics"]["metrics"] == {"avgMetrics": {"acc": "NaN"}, "batchMetrics": None}
    assert report["metrics"]["reportTime"].endswith("+00:00")


def test_413_splits_the_batch() -> None:
    landed: list[int] = []
    first_seen = threading.Event()
    release = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        got = steps(request)
        first_seen.set()
        assert release.wait(WAIT_S)
        if len(got) > 1:
            return httpx.Response(413, json={"message": "too large"})
        landed.extend(got)
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler)
    shipper.publish(prepare_report("training", 0, {"loss": 1.0}))
    assert first_seen.wait(WAIT_S)
    for step in range(1, 6):
        shipper.publish(prepare_report("training", step, {"loss": 1.0}))
    release.set()
    shipper.close()
    session.close()
    assert landed == [0, 1, 2, 3, 4, 5]


def test_a_refusal_is_raised_once_by_the_next_call() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if steps(request) == [1]:
            return httpx.Response(400, json={"message": "invalid run id"})
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler)
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    shipper.close(raise_errors=False)  # flushes; the error is logged, not raised
    assert shipper.dropped == 1
    session.close()

    shipper, session = shipper_over(handler)
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    with pytest.raises(errors.InvalidArgumentError, match="invalid run id"):
        shipper.close()
    shipper.close()  # idempotent; the error was raised once
    with pytest.raises(RuntimeError, match="after the context was closed"):
        shipper.publish(prepare_report("training", 2, {"loss": 1.0}))
    session.close()


def test_prepare_report_checks() -> None:
    with pytest.raises(ValueError, match="metric group"):
        prepare_report("", 1, {})
    with pytest.raises(TypeError, match="steps_completed must be an int"):
        prepare_report("training", True, {})
    with pytest.raises(TypeError, match="metrics must be a dict"):
        prepare_report("training", 1, [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="batch_metrics must be a list of dicts"):
        prepare_report("training", 1, {}, [1])  # type: ignore[list-item]


def test_the_fast_snapshot_is_the_same_snapshot() -> None:
    plain = {"loss": 0.5, "step": 3}
    report = prepare_report("training", 1, plain)
    plain["loss"] = 9.0  # later changes do not leak into the report
    assert report.metrics == {"loss": 0.5, "step": 3}
    odd = prepare_report("training", 1, {"nan": float("nan"), "flag": True, "n": {"x": 1}})
    assert odd.metrics == {"nan": "NaN", "flag": True, "n": {"x": 1}}
    assert report.report_time.endswith("+00:00")


def test_publish_blocks_while_the_queue_is_full() -> None:
    first_seen = threading.Event()
    release = threading.Event()
    landed: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        first_seen.set()
        assert release.wait(WAIT_S)
        landed.extend(steps(request))
        return httpx.Response(200, json={})

    reports = [prepare_report("training", step, {"loss": 1.0}) for step in (1, 2, 3)]
    probe, probe_session = shipper_over(handler)
    size = len(probe._wire(reports[1])) + 1  # what one report takes in the queue
    probe_session.close()
    shipper, session = shipper_over(handler, max_queue_bytes=size + 1)
    shipper.publish(reports[0])
    assert first_seen.wait(WAIT_S)  # the first report is in a post that waits
    shipper.publish(reports[1])  # fills the queue
    blocked = threading.Thread(target=shipper.publish, args=(reports[2],))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # no room until the master answers
    release.set()
    blocked.join(WAIT_S)
    assert not blocked.is_alive()
    shipper.close()
    session.close()
    assert landed == [1, 2, 3]


def test_flush_waits_for_what_was_published() -> None:
    first_seen = threading.Event()
    release = threading.Event()
    landed: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        first_seen.set()
        assert release.wait(WAIT_S)
        landed.extend(steps(request))
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler)
    shipper.flush()  # nothing published yet: returns at once
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    assert first_seen.wait(WAIT_S)
    shipper.publish(prepare_report("training", 2, {"loss": 0.5}))
    flushing = threading.Thread(target=shipper.flush)
    flushing.start()
    flushing.join(0.2)
    assert flushing.is_alive()  # the master has not answered yet
    release.set()
    flushing.join(WAIT_S)
    assert not flushing.is_alive()
    assert landed == [1, 2]  # both posted before flush returned
    shipper.publish(prepare_report("training", 3, {"loss": 0.3}))  # still usable
    shipper.close()
    session.close()
    assert landed == [1, 2, 3]


def test_a_checkpoint_is_reported_after_the_metrics_before_it(tmp_path: Path) -> None:
    """A resumed run starts after the trial's latest checkpoint: the metrics reported before
    that checkpoint must have reached the master first, or a lost run leaves a gap."""
    order: list[str] = []
    checkpoint_seen = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/trials/metrics/batch":
            # a slow master: a checkpoint report sent without waiting would overtake this one
            checkpoint_seen.wait(0.2)
            order.extend(f"metrics {step}" for step in steps(request))
        elif request.url.path == "/api/v1/checkpoints":
            checkpoint_seen.set()
            order.append(f"checkpoint {json.loads(request.content)['metadata']['steps_completed']}")
        return httpx.Response(200, json={})

    session = Session("http://m:8080", "tok", retry=FAST, transport=httpx.MockTransport(handler))
    train = TrainContext(session, trial_id=7, trial_run_id=1, experiment_id=1, allocation_id="a")
    checkpoints = CheckpointContext(
        DummyDistributedContext(),
        DirectoryStorage(tmp_path),
        session,
        task_id="t",
        allocation_id="a",
        storage_backend_id=lambda: None,
        before_report=train.flush_metrics,
    )
    for step in (1, 2, 3):
        train.report_training_metrics(step, {"loss": 1.0 / step})
        with checkpoints.store_path({"steps_completed": step}) as (path, _uuid):
            (path / "state").write_text(str(step))
    train.close()
    session.close()
    assert order == [item for s in (1, 2, 3) for item in (f"metrics {s}", f"checkpoint {s}")]


# -- under Stalwart's agent: the reports spool ---------------------------------------------------


def spooled(spool: Path) -> list[list[int]]:
    """The steps of each batch file the shipper left in the spool (hidden files excluded)."""
    return [
        [r["metrics"]["stepsCompleted"] for r in json.loads(f.read_bytes())["reports"]]
        for f in sorted(spool.glob("reports-*.json"))
    ]


def test_with_a_spool_close_hands_what_is_unanswered_to_the_agent(tmp_path: Path) -> None:
    """A trial that reports and exits does not wait for the master: the report in a post the
    master has not answered and the queued ones go to the spool, in order, and close returns
    with no error (the agent sends them with the exit)."""
    in_flight = threading.Event()
    never = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        in_flight.set()
        never.wait(WAIT_S)  # the master does not answer before the trial is gone
        return httpx.Response(503)

    shipper, session = shipper_over(handler, spool=tmp_path)
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    assert in_flight.wait(WAIT_S)  # posted once its linger is over
    shipper.publish(prepare_report("training", 2, {"loss": 0.5}))
    shipper.publish(prepare_report("validation", 2, {"loss": 0.4}))
    flushing = threading.Thread(target=shipper.flush)  # another thread waiting on the master
    flushing.start()
    shipper.close()  # returns although the post never will
    flushing.join(WAIT_S)
    assert not flushing.is_alive()  # what it waited for was handed over
    assert spooled(tmp_path) == [[1, 2, 2]]
    assert list(tmp_path.glob(".*")) == []  # no half-written file left
    assert shipper.dropped == 0
    session.close()  # cuts the post short: not a drop, the agent has those reports
    never.set()
    assert shipper.dropped == 0


def test_with_a_spool_answered_reports_are_not_handed_over(tmp_path: Path) -> None:
    posted: list[list[int]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        posted.append(steps(request))
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler, spool=tmp_path)
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    shipper.flush()  # ends the linger: posted and answered
    assert posted == [[1]]
    shipper.publish(prepare_report("training", 2, {"loss": 0.5}))
    shipper.close()
    session.close()
    assert posted + spooled(tmp_path) == [[1], [2]]  # each report went one way, once


def test_with_a_spool_too_much_is_posted_as_without_one(tmp_path: Path) -> None:
    posted: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        posted.extend(steps(request))
        return httpx.Response(200, json={})

    big = {f"metric_{i}": float(i) for i in range(40_000)}  # ~0.9 MB of JSON each
    shipper, session = shipper_over(handler, spool=tmp_path)
    shipper.publish(prepare_report("training", 1, big))
    shipper.publish(prepare_report("training", 2, big))
    shipper.close()  # over SPOOL_MAX_BYTES: flushed to the master instead
    session.close()
    assert (sorted(posted), spooled(tmp_path)) == ([1, 2], [])


def test_a_spool_that_cannot_be_written_leaves_the_reports_to_a_post(tmp_path: Path) -> None:
    posted: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        posted.extend(steps(request))
        return httpx.Response(200, json={})

    shipper, session = shipper_over(handler, spool=tmp_path / "gone")
    shipper.publish(prepare_report("training", 1, {"loss": 1.0}))
    shipper.close()
    session.close()
    assert posted == [1]
    assert shipper.dropped == 0
