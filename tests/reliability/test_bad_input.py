"""Oversized and malformed requests get a 4xx answer, quickly, from a real master process.

The master runs with small ``limits`` so the tests send little: an over-limit body is refused
whether it declares its length (413 before it is read) or streams it chunked (413 once the limit
is passed), and so are over-limit metric reports and log batches. Nothing here may answer 5xx or
hang: every request has a 10 s timeout.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.reliability.conftest import MASTER_CONFIG, make_cluster

LIMITS = """\
limits:
  max_request_bytes: 200000
  max_metrics_report_bytes: 20000
  max_log_batch: 50
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Api]]:
    tmp: Path = tmp_path_factory.mktemp("bad-input")
    cluster = make_cluster(tmp, MASTER_CONFIG + LIMITS)
    cluster.start_master()
    api = Api(cluster.url)
    api.http.timeout = httpx.Timeout(10.0)
    try:
        yield cluster, api
    finally:
        api.close()
        cluster.stop()


def _check_4xx(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert words in response.json()["message"], response.json()


def test_an_oversized_declared_body_is_413_before_it_is_read(
    master: tuple[LocalCluster, Api],
) -> None:
    cluster, api = master
    token = api.http.headers["Authorization"]
    head = (
        "POST /api/v1/experiments HTTP/1.1\r\n"
        f"Host: {cluster.host}\r\nAuthorization: {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{"
    )
    # one byte of ten million: a master that waited for the body would hang here
    with socket.create_connection((cluster.host, cluster.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line = answer.split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:300]


def test_an_oversized_chunked_body_is_413(master: tuple[LocalCluster, Api]) -> None:
    _, api = master

    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        yield b'{"config": "'
        for _ in range(100):
            yield b"x" * 10_000
        yield b'"}'

    response = api.http.post("/api/v1/experiments", content=chunks())
    _check_4xx(response, 413, "limits.max_request_bytes")


def test_an_oversized_metrics_report_is_413(master: tuple[LocalCluster, Api]) -> None:
    _, api = master
    metrics = {f"m{i}": float(i) for i in range(2000)}
    body = {
        "metrics": {"trialId": 1, "trialRunId": 1, "stepsCompleted": 1, "avgMetrics": metrics},
        "group": "training",
    }
    response = api.http.post("/api/v1/trials/1/metrics", json=body)
    _check_4xx(response, 413, "limits.max_metrics_report_bytes")
    batch = {"reports": [body]}
    response = api.http.post("/api/v1/trials/metrics/batch", json=batch)
    _check_4xx(response, 413, "limits.max_metrics_report_bytes")


def test_an_oversized_log_batch_is_413(master: tuple[LocalCluster, Api]) -> None:
    _, api = master
    lines = [{"taskId": "nope", "log": f"line {i}\n"} for i in range(51)]
    response = api.http.post("/api/v1/task/logs", json={"logs": lines})
    _check_4xx(response, 413, "limits.max_log_batch")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/experiments", b"{not json"),
        ("/api/v1/experiments", b'{"config": 5, "modelDefinition": "x"}'),
        ("/api/v1/experiments", b'{"config": "name: [unclosed", "activate": true}'),
        ("/api/v1/trials/1/metrics", b"[]"),
        ("/api/v1/trials/metrics/batch", b'{"reports": [{"metrics": null}]}'),
        ("/api/v1/task/logs", json.dumps({"logs": [{"log": 1}]}).encode()),
    ],
)
def test_malformed_bodies_are_4xx(master: tuple[LocalCluster, Api], path: str, body: bytes) -> None:
    _, api = master
    response = api.http.post(path, content=body)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert response.json()["message"]
