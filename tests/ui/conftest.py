"""Fixtures of the browser tests: Debian's chromium driven by Playwright, a real master and
agent running a small adaptive_asha experiment (profiled, so that trials have system metrics),
and a second master without agents holding 100 trials of seeded metrics (the scale test).

Under ``CI=true`` a browser that cannot start is a failure (``scripts/ui/browser.sh`` installs
chromium first); elsewhere the tests are skipped with the reason. Screenshots go to
``$STALWART_UI_ARTIFACTS`` (default ``tests/ui/artifacts/``, git-ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.client.support import running_cluster
from tests.examples.conftest import EXAMPLES, completed, example_config
from tests.integration.conftest import MASTER_CONFIG, free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ROOT = Path(__file__).resolve().parents[2]
BROWSER_SCRIPT = ROOT / "scripts" / "ui" / "browser.sh"
CHROMIUM = os.environ.get("STALWART_CHROMIUM", "/usr/bin/chromium")
CORE_API = EXAMPLES / "core_api"

HPSEARCH_OVERRIDES: dict[str, Any] = {
    "hyperparameters.batches": 20,
    "searcher.max_time": 20,
    "searcher.max_trials": 4,
    "searcher.max_concurrent_trials": 2,
    "profiling.enabled": True,
}
"""examples/core_api/3_hpsearch.yaml shortened to seconds (as tests/examples does), with the
profiler on so that each trial reports the system-metric groups (cpu, memory, disk, network)."""

BIG_TRIALS = 100
"""Trials of the scale test's experiment."""
BIG_LONG_POINTS = 10_000
"""Points of the scale test's longest series (its first ``BIG_LONG_TRIALS`` trials)."""
BIG_LONG_TRIALS = 2
BIG_POINTS = int(os.environ.get("STALWART_UI_BIG_POINTS", "1000"))
"""Points of every other trial: 1,000 by default to keep the directory fast (seeding runs at
about 5,000 reports a second on two busy cores); ``STALWART_UI_BIG_POINTS=10000`` seeds the
full 100 trials x 10,000 points."""


def in_ci() -> bool:
    """Whether a missing browser must fail the tests rather than skip them."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"browser tests cannot run under CI=true: {reason}")
    pytest.skip(
        f"browser tests skipped: {reason} (run scripts/ui/browser.sh as root, and "
        "`pip install -e '.[dev]'` for playwright)"
    )


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots are saved (printed so that a run's log names it)."""
    path = Path(os.environ.get("STALWART_UI_ARTIFACTS", ROOT / "tests" / "ui" / "artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nUI screenshots: {path}")
    return path


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Headless Debian chromium under Playwright (installed first under CI).

    Package-scoped on purpose: Playwright's sync API keeps an asyncio loop running in this thread
    while it is open, which would break later tests that call ``asyncio.run``.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    if in_ci():
        done = subprocess.run(
            ["bash", str(BROWSER_SCRIPT)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            pytest.fail(f"{BROWSER_SCRIPT} failed:\n{done.stdout}\n{done.stderr}")
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is not installed")
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
        except Exception as err:  # Playwright raises its own Error types
            _unavailable(f"{CHROMIUM} does not start: {err}")
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab (its own sessionStorage) with a desktop viewport and a fast poll; actions and
    ``expect`` assertions wait up to 20 s (a loaded machine answers slowly, never wrongly)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script("localStorage.setItem('stalwart.pollMs', '500')")
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A real master and one agent with two CPU slots."""
    with running_cluster(tmp_path_factory.mktemp("ui-cluster"), slots=2) as running:
        yield running


@pytest.fixture(scope="package")
def client(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """The Python SDK, logged in as admin."""
    config_dir = tmp_path_factory.mktemp("ui-client")
    with Client(cluster.url, "admin", "", config_dir=config_dir, environ={}) as admin:
        yield admin


@pytest.fixture(scope="package")
def asha(client: Client) -> Experiment:
    """A completed adaptive_asha experiment (4 trials of the Core API example)."""
    config = example_config(CORE_API / "3_hpsearch.yaml", HPSEARCH_OVERRIDES)
    exp = client.create_experiment(config, CORE_API)
    completed(exp, timeout=180)
    return exp.reload()


def sign_in(page: Page, url: str, at: str = "") -> None:
    """Open the UI and sign in as admin (empty password) with the keyboard. With ``at`` (a hash
    route such as ``#/admin/users``) the page is opened there and stays there once signed in;
    without, it lands on the experiments list."""
    from playwright.sync_api import expect

    page.goto(f"{url}/{at}")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("")
    page.get_by_label("Password").press("Enter")
    if not at:
        expect(page.get_by_role("heading", name="Experiments", exact=True)).to_be_visible()


def settled_width(page: Page, width: int, timeout_ms: float = 20_000) -> int:
    """The page's scroll width once it fits ``width`` px, or as it is after ``timeout_ms`` (a
    page resized while open lays its charts out again on the next frames, not at once)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    fits = f"() => document.documentElement.scrollWidth <= {width}"
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(fits, timeout=timeout_ms)
    return int(page.evaluate("document.documentElement.scrollWidth"))


def admin_headers(url: str) -> dict[str, str]:
    """``Authorization: Bearer`` with a fresh admin token."""
    answer = httpx.post(f"{url}/api/v1/auth/login", json={"username": "admin", "password": ""})
    answer.raise_for_status()
    return {"Authorization": f"Bearer {answer.json()['token']}"}


@dataclass(frozen=True)
class BigSearch:
    """The scale test's master and experiment: ``points[trial_id]`` training ``loss`` reports."""

    url: str
    experiment_id: int
    points: dict[int, int]
    seed_seconds: float


def _report(trial_id: int, steps: int) -> dict[str, Any]:
    return {
        "group": "training",
        "metrics": {
            "metrics": {"avgMetrics": {"loss": 0.2 + (trial_id % 10) * 0.05 + 500 / (500 + steps)}},
            "trialId": trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "reportTime": "2025-01-01T00:00:00Z",
        },
    }


@pytest.fixture(scope="package")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BigSearch]:
    """A master without agents and a random search of 100 trials (created at once, never run),
    with training ``loss`` seeded through ``POST /api/v1/trials/metrics/batch``."""
    home = tmp_path_factory.mktemp("ui-big")
    config = home / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=home / "home", port=free_port(), master_config=config)
    cluster.start_master()
    try:
        context = home / "context"
        context.mkdir()
        (context / "train.py").write_text("print('never runs: this master has no agent')\n")
        exp_config = {
            "name": "ui-scale",
            "entrypoint": "python3 train.py",
            "hyperparameters": {"lr": {"type": "log", "base": 10, "minval": -4, "maxval": 0}},
            "searcher": {
                "name": "random",
                "metric": "loss",
                "max_trials": BIG_TRIALS,
                "max_concurrent_trials": BIG_TRIALS,
            },
        }
        with Client(cluster.url, "admin", "", config_dir=home / "client", environ={}) as admin:
            exp = admin.create_experiment(exp_config, context)
            deadline = time.monotonic() + 60
            while len(trials := exp.trials()) < BIG_TRIALS:
                assert time.monotonic() < deadline, f"only {len(trials)} trials were created"
                time.sleep(0.2)
        trial_ids = sorted(t.id for t in trials)
        points = {
            t: BIG_LONG_POINTS if i < BIG_LONG_TRIALS else BIG_POINTS
            for i, t in enumerate(trial_ids)
        }
        started = time.monotonic()
        headers = admin_headers(cluster.url)
        with httpx.Client(timeout=120) as http:
            batch: list[dict[str, Any]] = []
            for trial_id, count in points.items():
                for steps in range(1, count + 1):
                    batch.append(_report(trial_id, steps))
                    if len(batch) == 5000:
                        _post(http, cluster.url, headers, batch)
                        batch = []
            if batch:
                _post(http, cluster.url, headers, batch)
        seeded = time.monotonic() - started
        print(f"\nseeded {sum(points.values())} reports in {seeded:.1f} s")
        yield BigSearch(cluster.url, exp.id, points, seeded)
    finally:
        cluster.stop()


def _post(
    http: httpx.Client, url: str, headers: dict[str, str], batch: list[dict[str, Any]]
) -> None:
    answer = http.post(
        f"{url}/api/v1/trials/metrics/batch",
        content=json.dumps({"reports": batch}),
        headers={**headers, "Content-Type": "application/json"},
    )
    assert answer.status_code == 200, answer.text


@contextmanager
def master_with_user(home: Path, username: str, password: str) -> Iterator[str]:
    """A real master without agents under ``home``, with one more active user (not an admin,
    no role assignment); its address."""
    config = home / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=home / "home", port=free_port(), master_config=config)
    cluster.start_master()
    try:
        made = httpx.post(
            f"{cluster.url}/api/v1/users",
            json={"user": {"username": username, "active": True}, "password": password},
            headers=admin_headers(cluster.url),
        )
        assert made.status_code == 200, made.text
        yield cluster.url
    finally:
        cluster.stop()
