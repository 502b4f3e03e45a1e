"""Fixtures of the browser tests: Debian's chromium driven by Playwright, and a real master and
agent running a small adaptive_asha experiment.

Under ``CI=true`` a browser that cannot start is a failure (``scripts/ui/browser.sh`` installs
chromium first); elsewhere the tests are skipped with the reason. Screenshots go to
``$STALWART_UI_ARTIFACTS`` (default ``tests/ui/artifacts/``, git-ignored).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.client.support import running_cluster
from tests.examples.conftest import EXAMPLES, completed, example_config

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
}
"""examples/core_api/3_hpsearch.yaml shortened to seconds (as tests/examples does)."""


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
    """A fresh tab (its own sessionStorage) with a desktop viewport and a fast poll."""
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
