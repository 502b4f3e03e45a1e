"""Schemathesis fuzzes every REST operation of a real master from its own ``/openapi.json``.

Contract: whatever a client sends, within or outside the published schema, the master answers
with something other than a 5xx, within the request timeout (no hang). The master is a real
``stalwart master`` process on SQLite, seeded with a user, an experiment and its trial so that
generated ids sometimes hit real rows. Two runs:

- as the built-in admin (every operation, a fixed number of examples each, derandomized so CI
  sees the same requests every time);
- without credentials (fewer examples: everything except ``/info`` and login must refuse).

A few generated values are pinned so one request cannot end the run for the others: operations
that change a user act on a victim user (never on the admin whose token the run uses), logout
is tried with its own token, log ``follow`` and preemption long polls are kept short.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from http.cookiejar import DefaultCookiePolicy
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import BaseSchema, Case, GenerationMode, Response
from schemathesis.core.result import Err

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.reliability.conftest import MASTER_CONFIG, experiment_config, make_cluster

# Examples per operation: about 260 operations (method and path) x (20 + 4) requests, about
# 100 s on two busy cores (most of it generating the requests), over one keep-alive connection.
ADMIN_EXAMPLES = 20
ANONYMOUS_EXAMPLES = 4
REQUEST_TIMEOUT = 20.0
FuzzCase = Case[Any]
OPEN_OPERATIONS = frozenset(
    {
        "GET /info",
        "GET /health",
        "GET /api/v1/master",
        "POST /api/v1/auth/login",
        "GET /openapi.json",
    }
)
"""What answers without a token (:data:`stalwart.master.policy.PUBLIC_ROUTES`)."""


class Seeded:
    """The fuzzed master and what the test created on it."""

    def __init__(self, cluster: LocalCluster, api: Api) -> None:
        self.cluster = cluster
        self.api = api
        self.token = api.http.headers["Authorization"]
        victim = api.post(
            "/api/v1/users", {"user": {"username": "fuzz-victim", "active": True}, "password": ""}
        )
        self.victim_id = int(victim["user"]["id"])
        config = experiment_config(
            "  name: single\n  metric: loss\n  max_length:\n    batches: 10",
            "  lr: 0.1",
        )
        self.experiment_id = api.create_experiment(config, {"train.py": "print('hi')\n"})

    def fresh_token(self) -> str:
        """A new admin session's Authorization header (for logout, which ends it)."""
        login = self.api.http.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
        login.raise_for_status()
        return f"Bearer {login.json()['token']}"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    tmp: Path = tmp_path_factory.mktemp("api-fuzz")
    cluster = make_cluster(tmp, MASTER_CONFIG)
    cluster.start_master()
    api = Api(cluster.url)
    try:
        yield Seeded(cluster, api)
    finally:
        api.close()
        cluster.stop()


def _label(case: FuzzCase) -> str:
    return f"{case.method.upper()} {case.path}"


def _pin(case: FuzzCase, seeded: Seeded) -> None:
    """Keep one generated request from ending the run for the others (see module docstring)."""
    if case.path_parameters and "user_id" in case.path_parameters:
        case.path_parameters["user_id"] = seeded.victim_id
    if _label(case) == "PATCH /api/v1/users" and isinstance(case.body, dict):
        case.body["userIds"] = [seeded.victim_id]
    if case.query:
        if "follow" in case.query:
            case.query["follow"] = "false"
        for key in ("timeout_seconds", "timeoutSeconds"):
            if key in case.query:
                case.query[key] = 1


Check = Callable[[FuzzCase, Response], str | None]


def _fuzz(
    seeded: Seeded, examples: int, auth: Callable[[FuzzCase], dict[str, str]], check: Check
) -> None:
    """Send ``examples`` generated requests (valid and invalid ones) to every operation; fail
    with every operation that answered 5xx, hung, or failed ``check``, each with a curl line."""
    schema = schemathesis.openapi.from_url(f"{seeded.cluster.url}/openapi.json")
    with _session() as session:
        _fuzz_with(seeded, schema, session, examples, auth, check)


@contextlib.contextmanager
def _session() -> Iterator[requests.Session]:
    """One keep-alive HTTP session for all of a run's requests (``Case.call`` without one opens
    a session and a connection per request). It keeps no cookies, so each request carries only
    the headers ``auth`` gives it, and reads nothing from the environment (proxies, netrc)."""
    with requests.Session() as session:
        session.trust_env = False
        session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        yield session


def _fuzz_with(
    seeded: Seeded,
    schema: BaseSchema,
    session: requests.Session,
    examples: int,
    auth: Callable[[FuzzCase], dict[str, str]],
    check: Check,
) -> None:
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            failures.append(f"an operation the fuzzer cannot read: {result.err()}")
            continue
        operation = result.ok()
        operations += 1
        strategies = [operation.as_strategy(GenerationMode.POSITIVE)]
        with contextlib.suppress(Exception):  # some operations have nothing to negate
            strategies.append(operation.as_strategy(GenerationMode.NEGATIVE))

        @given(case=st.one_of(strategies))
        @settings(
            max_examples=examples,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def run(case: FuzzCase) -> None:
            _pin(case, seeded)
            headers = auth(case)
            try:
                response = case.call(session=session, headers=headers, timeout=REQUEST_TIMEOUT)
            except OSError as exc:  # requests' errors, a timeout included
                raise AssertionError(f"no answer within {REQUEST_TIMEOUT:g}s: {exc}") from exc
            problem = (
                f"{response.status_code}: {response.text[:300]}"
                if response.status_code >= 500
                else check(case, response)
            )
            if problem:
                raise AssertionError(f"{problem}\n    {case.as_curl_command(headers=headers)}")

        try:
            run()
        except AssertionError as exc:
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert operations >= 50, f"only {operations} operations in the master's OpenAPI description"
    assert not failures, "\n".join(failures)


def _anything(case: FuzzCase, response: Response) -> str | None:
    return None


def _refused(case: FuzzCase, response: Response) -> str | None:
    if _label(case) in OPEN_OPERATIONS or response.status_code in {400, 401, 404, 405, 413, 422}:
        return None
    return f"served without a token: {response.status_code} {response.text[:200]}"


def test_no_operation_answers_5xx_or_hangs_for_the_admin(seeded: Seeded) -> None:
    def admin(case: FuzzCase) -> dict[str, str]:
        if _label(case) == "POST /api/v1/auth/logout":
            return {"Authorization": seeded.fresh_token()}
        return {"Authorization": seeded.token}

    _fuzz(seeded, ADMIN_EXAMPLES, admin, _anything)


def test_without_a_token_only_the_public_routes_answer(seeded: Seeded) -> None:
    _fuzz(seeded, ANONYMOUS_EXAMPLES, lambda case: {}, _refused)
