"""The experiment list a UI needs, against a real ``stalwart master`` over HTTP, on SQLite and
PostgreSQL: sorting by every kind of column both ways (NULLs last, ties by id), paging
totals, filters, the best searcher metric on every list row, and conditional GETs.

The data go in through the master's own services (experiments created, trials created,
validations ingested by :func:`report_metrics_many`, the one door that keeps the experiment's
stored best searcher metric), before the master starts on the same database.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from stalwart.master.app import open_state
from stalwart.master.db.tables import Experiment, User, utcnow
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.services.tasks import create_trial, start_allocation
from stalwart.master.settings import MasterSettings
from tests.conftest import private_pg_schema

CONFIG = """\
name: {name}
entrypoint: python3 train.py
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: validation_loss
"""

Value = float | str | None


@dataclass(frozen=True)
class Seeded:
    """One experiment as the tests see it: its id and the values of its computed columns."""

    id: int
    columns: dict[str, Value]


# name -> trials: (hparams, validation reports in step order)
PLAN: dict[str, list[tuple[dict[str, Any], list[dict[str, float]]]]] = {
    "e1": [
        ({"lr": 0.1, "optimizer": "adam"}, [{"validation_loss": 0.5, "accuracy": 0.6}]),
        ({"lr": 0.01, "optimizer": "sgd"}, [{"validation_loss": 0.4}, {"validation_loss": 0.3}]),
    ],
    "e2": [({"lr": 0.001, "optimizer": "sgd"}, [{"validation_loss": 0.9, "accuracy": 0.2}])],
    "e3": [({"lr": 1, "optimizer": "adam"}, [{"validation_loss": 0.3, "accuracy": 0.9}])],
    "e4": [({"lr": 0.05, "optimizer": "adam"}, [])],
    "e5": [],
    "e6": [({"lr": "auto", "optimizer": "sgd"}, [{"validation_loss": 0.7, "accuracy": 0.5}])],
}
EXPECTED: dict[str, dict[str, Value]] = {
    # the best trial of e1 is its second (0.3): hyperparameters and summaries come from it
    "e1": {
        "searcherMetricsVal": 0.3,
        "hp.lr": 0.01,
        "hp.optimizer": "sgd",
        "validation.validation_loss.min": 0.3,
        "validation.validation_loss.max": 0.4,
        "validation.validation_loss.mean": 0.35,
        "validation.validation_loss.last": 0.3,
        "validation.validation_loss": 0.3,
        "validation.accuracy.max": None,
        "numTrials": 2,
    },
    "e2": {
        "searcherMetricsVal": 0.9,
        "hp.lr": 0.001,
        "hp.optimizer": "sgd",
        "validation.validation_loss.min": 0.9,
        "validation.validation_loss.max": 0.9,
        "validation.validation_loss.mean": 0.9,
        "validation.validation_loss.last": 0.9,
        "validation.validation_loss": 0.9,
        "validation.accuracy.max": 0.2,
        "numTrials": 1,
    },
    "e3": {
        "searcherMetricsVal": 0.3,
        "hp.lr": 1,
        "hp.optimizer": "adam",
        "validation.validation_loss.min": 0.3,
        "validation.validation_loss.max": 0.3,
        "validation.validation_loss.mean": 0.3,
        "validation.validation_loss.last": 0.3,
        "validation.validation_loss": 0.3,
        "validation.accuracy.max": 0.9,
        "numTrials": 1,
    },
    # no validation yet: the hyperparameters of its first trial, no metrics
    "e4": {"hp.lr": 0.05, "hp.optimizer": "adam", "numTrials": 1},
    "e5": {"numTrials": 0},
    "e6": {
        "searcherMetricsVal": 0.7,
        "hp.lr": "auto",
        "hp.optimizer": "sgd",
        "validation.validation_loss.min": 0.7,
        "validation.validation_loss.max": 0.7,
        "validation.validation_loss.mean": 0.7,
        "validation.validation_loss.last": 0.7,
        "validation.validation_loss": 0.7,
        "validation.accuracy.max": 0.5,
        "numTrials": 1,
    },
}
SORT_KEYS = sorted({key for values in EXPECTED.values() for key in values})


def _seed(settings: MasterSettings) -> dict[str, int]:
    """Create :data:`PLAN` through the master's services; ``{name: experiment id}``."""
    state = open_state(settings)
    ids: dict[str, int] = {}
    try:
        with state.sessions() as session:
            admin = session.scalars(select(User).where(User.username == "admin")).one()
            reports: list[MetricsInput] = []
            for name, trials in PLAN.items():
                exp = create_experiment(
                    session,
                    settings,
                    admin,
                    config_text=CONFIG.format(name=name),
                    model_definition=[],
                    activate=False,
                ).experiment
                ids[name] = exp.id
                for seed, (hparams, validations) in enumerate(trials):
                    trial = create_trial(session, exp, hparams=hparams, seed=seed)
                    start_allocation(session, trial.task_id, slots=1)
                    for step, metrics in enumerate(validations, start=1):
                        reports.append(
                            MetricsInput(trial.id, trial.run_id, "validation", step * 10, metrics)
                        )
            # finished experiments: the master's loop leaves them alone, and their answers
            # stay the same from one second to the next (a running one's duration grows)
            session.execute(
                update(Experiment).values(
                    state="COMPLETED", checkpoints_collected=True, end_time=utcnow()
                )
            )
            session.commit()
            for report in reports:  # one report per transaction, as trials send them
                report_metrics_many(session, [report])
    finally:
        state.engine.dispose()
    return ids


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Master:
    """A running master: its URL, an authenticated client and the seeded experiments."""

    url: str
    http: httpx.Client
    ids: dict[str, int]


def _start(home: Path, db: str) -> Iterator[Master]:
    settings = MasterSettings(home=home, db=db)
    ids = _seed(settings)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALWART_", "DET_"))}
    log_path = home.parent / "master.log"
    cmd = [sys.executable, "-m", "stalwart", "master", "--port", str(port), "--home", str(home)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*cmd, "--db", db], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log_path.read_text(errors="replace")
            try:
                if httpx.get(f"{url}/info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.1)
        with httpx.Client(base_url=url, timeout=30) as http:
            login = http.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
            http.headers["Authorization"] = f"Bearer {login.json()['token']}"
            yield Master(url, http, ids)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def master(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp(f"list-{request.param}") / "home"
    home.mkdir()
    if request.param == "sqlite":
        yield from _start(home, f"sqlite:///{home / 'master.db'}")
        return
    with private_pg_schema() as db:
        yield from _start(home, db)


def _expected_order(master: Master, key: str, descending: bool) -> list[int]:
    """The order the contract promises: numbers (numerically), then text, then missing, in
    both directions; ties by id in the key's direction."""

    def within(name: str) -> tuple[int, Any]:
        value = EXPECTED[name].get(key)
        if isinstance(value, int | float):
            return 0, value
        return (1, value) if isinstance(value, str) else (2, 0)

    names = sorted(PLAN, key=lambda n: master.ids[n], reverse=descending)
    names.sort(key=within, reverse=descending)  # stable: ties keep the id order
    names.sort(key=lambda n: within(n)[0])  # numbers, then text, then missing, both ways
    return [master.ids[n] for n in names]


def _search(master: Master, **body: Any) -> dict[str, Any]:
    answer = master.http.post("/api/v1/experiments-search", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _ids(result: dict[str, Any]) -> list[int]:
    return [int(e["experiment"]["id"]) for e in result["experiments"]]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("key", SORT_KEYS)
def test_every_computed_column_sorts_both_ways_with_nulls_last(
    master: Master, key: str, descending: bool
) -> None:
    sort = f"{key}={'desc' if descending else 'asc'}"
    assert _ids(_search(master, sort=sort)) == _expected_order(master, key, descending)
    # GET /experiments takes the same sort (a Stalwart extension of Determined's wire)
    listed = master.http.get("/api/v1/experiments", params={"sort": sort})
    assert listed.status_code == 200, listed.text
    assert [e["id"] for e in listed.json()["experiments"]] == _expected_order(
        master, key, descending
    )


@pytest.mark.parametrize("order", ["ORDER_BY_ASC", "ORDER_BY_DESC"])
def test_determined_sort_by_searcher_metric_uses_the_stored_best(
    master: Master, order: str
) -> None:
    listed = master.http.get(
        "/api/v1/experiments", params={"sortBy": "SORT_BY_SEARCHER_METRIC_VAL", "orderBy": order}
    )
    assert listed.status_code == 200, listed.text
    rows = listed.json()["experiments"]
    descending = order == "ORDER_BY_DESC"
    assert [e["id"] for e in rows] == _expected_order(master, "searcherMetricsVal", descending)
    # the "Best metric" column: present on every list row without showTrialData
    best = {e["id"]: e.get("bestTrialSearcherMetric") for e in rows}
    assert best == {master.ids[n]: EXPECTED[n].get("searcherMetricsVal") for n in PLAN}, best


def test_every_fixed_column_sorts_both_ways(master: Master) -> None:
    columns = master.http.get("/api/v1/projects/1/columns")
    assert columns.status_code == 200, columns.text
    fixed = [
        c["column"]
        for c in columns.json()["columns"]
        if c["location"] == "LOCATION_TYPE_EXPERIMENT" and c["column"] != "externalTrialId"
    ]
    for name in [*fixed, "endTime"]:
        for direction in ("asc", "desc"):
            found = _ids(_search(master, sort=f"{name}={direction}"))
            assert sorted(found) == sorted(master.ids.values()), (name, direction)
    by_trials = _ids(_search(master, sort="numTrials=desc"))
    assert by_trials[0] == master.ids["e1"]
    assert by_trials[-1] == master.ids["e5"]


def test_pages_cover_the_order_once_with_the_total(master: Master) -> None:
    whole = _ids(_search(master, sort="hp.lr=asc"))
    pages: list[int] = []
    for offset in range(0, len(whole), 4):
        page = _search(master, sort="hp.lr=asc", offset=offset, limit=4)
        assert page["pagination"]["total"] == len(PLAN)
        assert page["pagination"]["offset"] == offset
        pages += _ids(page)
    assert pages == whole
    listed = master.http.get(
        "/api/v1/experiments", params={"sort": "hp.lr=asc", "offset": 2, "limit": 2}
    )
    assert [e["id"] for e in listed.json()["experiments"]] == whole[2:4]
    assert listed.json()["pagination"]["total"] == len(PLAN)


def _field(column: str, operator: str, value: Any = None) -> dict[str, Any]:
    return {"kind": "field", "columnName": column, "operator": operator, "value": value}


def _filter(conjunction: str, *children: dict[str, Any], archived: bool = True) -> str:
    group = {"kind": "group", "conjunction": conjunction, "children": list(children)}
    return json.dumps({"filterGroup": group, "showArchived": archived})


def test_filters_combine_with_sorting_and_paging_totals(master: Master) -> None:
    ids = master.ids
    adam_and_good = _filter(
        "and",
        _field("hp.optimizer", "=", "adam"),
        _field("validation.validation_loss.min", "<", 0.4),
    )
    found = _search(master, filter=adam_and_good, sort="id=desc")
    assert _ids(found) == [ids["e3"]]
    assert found["pagination"]["total"] == 1
    either = _filter(
        "or", _field("hp.lr", ">=", 0.05), _field("validation.accuracy.max", "<=", 0.2)
    )
    assert _ids(_search(master, filter=either, sort="hp.lr=asc")) == [
        ids["e2"],
        ids["e4"],
        ids["e3"],
    ]
    nested = _filter(
        "and",
        _field("name", "contains", "e"),
        {
            "kind": "group",
            "conjunction": "or",
            "children": [_field("searcherMetricsVal", "isEmpty")],
        },
    )
    assert sorted(_ids(_search(master, filter=nested))) == [ids["e4"], ids["e5"]]
    text = _filter("and", _field("hp.lr", "=", "auto"))
    assert _ids(_search(master, filter=text)) == [ids["e6"]]
    dated = _filter(
        "and",
        _field("startTime", ">=", "2000-01-01T00:00:00Z"),
        _field("archived", "=", False),
        _field("searcherMetric", "=", "validation_loss"),
    )
    assert sorted(_ids(_search(master, filter=dated))) == sorted(ids.values())
    future = _filter("and", _field("startTime", ">", "2999-01-01T00:00:00Z"))
    assert _ids(_search(master, filter=future)) == []
    page = _search(master, filter=_filter("and", _field("numTrials", ">", 0)), limit=2)
    assert page["pagination"]["total"] == 5
    assert len(page["experiments"]) == 2
    listed = master.http.get(
        "/api/v1/experiments", params={"filter": adam_and_good, "sort": "id=asc"}
    )
    assert [e["id"] for e in listed.json()["experiments"]] == [ids["e3"]]


def test_bad_sorts_and_filters_are_refused_with_what_to_do(master: Master) -> None:
    for body in (
        {"sort": "nosuchcolumn=asc"},
        {"sort": "hp.lr=sideways"},
        {"filter": "{not json"},
        {"filter": _filter("and", _field("numTrials", "~", 1))},
        {"filter": _filter("and", _field("numTrials", ">", "many"))},
    ):
        answer = master.http.post("/api/v1/experiments-search", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["message"]


def _get(master: Master, path: str, **headers: str) -> httpx.Response:
    return master.http.get(path, headers=headers)


def test_json_gets_carry_an_etag_and_answer_304_when_it_matches(master: Master) -> None:
    first = _get(master, "/api/v1/experiments?limit=3", **{"Accept-Encoding": "identity"})
    assert first.status_code == 200
    etag = first.headers["etag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    assert not etag.startswith("W/")
    assert first.headers["cache-control"] == "no-cache"
    assert re.fullmatch(r"app;dur=\d+\.\d, cpu;dur=\d+\.\d", first.headers["server-timing"])
    again = _get(master, "/api/v1/experiments?limit=3", **{"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    listed = _get(master, "/api/v1/experiments?limit=3", **{"If-None-Match": f'"x", W/{etag}'})
    assert listed.status_code == 304
    other = _get(master, "/api/v1/experiments?limit=2", **{"If-None-Match": etag})
    assert other.status_code == 200
    assert other.headers["etag"] != etag
    assert len(other.json()["experiments"]) == 2
    # a change to what is listed changes the tag
    exp_id = master.ids["e1"]
    patched = master.http.patch(f"/api/v1/experiments/{exp_id}", json={"description": "new"})
    assert patched.status_code == 200, patched.text
    changed = _get(master, "/api/v1/experiments?limit=3", **{"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != etag


def test_whole_answers_are_gzipped_for_clients_that_accept_it(master: Master) -> None:
    path = "/api/v1/experiments?limit=3"
    plain = _get(master, path, **{"Accept-Encoding": "identity"})
    packed = _get(master, path, **{"Accept-Encoding": "gzip, deflate"})
    assert "content-encoding" not in plain.headers
    assert plain.headers["vary"] == "Accept-Encoding"
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.headers["vary"] == "Accept-Encoding"
    assert packed.content == plain.content  # httpx decoded it
    assert packed.num_bytes_downloaded < len(plain.content) / 3
    assert packed.headers["etag"] == "W/" + plain.headers["etag"]  # the same body, weakly
    again = _get(
        master, path, **{"Accept-Encoding": "gzip", "If-None-Match": packed.headers["etag"]}
    )
    assert again.status_code == 304
    assert again.headers["etag"] == packed.headers["etag"]  # the copy the client holds
    refused = _get(master, path, **{"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers
    # small answers, streams, non-text types and HEAD pass as they are
    small = _get(master, "/api/v1/master", **{"Accept-Encoding": "gzip"})
    assert len(small.content) < 1024
    assert "content-encoding" not in small.headers
    trial = _search(master, sort="id=asc")["experiments"][0]["bestTrial"]
    logs = _get(master, f"/api/v1/trials/{trial['id']}/logs", **{"Accept-Encoding": "gzip"})
    assert logs.status_code == 200
    assert "content-encoding" not in logs.headers
    arrow = _get(
        master,
        f"/api/v1/trials/metrics/arrow?trialIds={trial['id']}&group=validation",
        **{"Accept-Encoding": "gzip"},
    )
    assert arrow.headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert "content-encoding" not in arrow.headers
    # the web UI's page and bundle, whole; a range of the bundle as it is
    page = _get(master, "/", **{"Accept-Encoding": "gzip"})
    script = re.search(r'src="(/ui/assets/[^"]+\.js)"', page.text)
    assert script is not None, page.text
    bundle = _get(master, script.group(1), **{"Accept-Encoding": "gzip"})
    assert bundle.headers["content-encoding"] == "gzip"
    assert bundle.num_bytes_downloaded < len(bundle.content) / 2
    assert (
        bundle.content == _get(master, script.group(1), **{"Accept-Encoding": "identity"}).content
    )
    head = master.http.head(script.group(1), headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in head.headers
    part = _get(master, script.group(1), **{"Accept-Encoding": "gzip", "Range": "bytes=0-99"})
    assert part.status_code == 206
    assert "content-encoding" not in part.headers
    assert part.content == bundle.content[:100]


def test_no_etag_on_errors_writes_or_streams(master: Master) -> None:
    missing = _get(master, "/api/v1/experiments/999999")
    assert missing.status_code == 404
    assert "etag" not in missing.headers
    searched = master.http.post("/api/v1/experiments-search", json={})
    assert searched.status_code == 200
    assert "etag" not in searched.headers
    trial = _search(master, sort="id=asc")["experiments"][0]["bestTrial"]
    logs = _get(master, f"/api/v1/trials/{trial['id']}/logs")
    assert logs.status_code == 200
    assert "etag" not in logs.headers
    info = _get(master, "/info")
    assert "etag" not in info.headers
