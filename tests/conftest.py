"""Fixtures for every test package: a private PostgreSQL schema when PostgreSQL is reachable.

``CI=true`` makes a missing PostgreSQL a failure instead of a skip.

Parallel workers (``make test`` runs pytest-xdist with ``--dist loadfile``):

- each test module runs whole on one worker (its module-scoped masters are started once), and
  the modules of each :data:`SERIAL_GROUPS` group share one worker, one after another (they use
  one machine-wide service or slow shared fixtures); see :func:`pytest_xdist_make_scheduler`;
- each worker's masters give their tasks ports of their own
  (``STALWART_CLUSTER__TASK_PORT_OFFSET``, :data:`PORT_OFFSETS_PER_WORKER` apart), so notebooks and
  distributed trials of two workers on this host never collide.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from xdist.remote import Producer  # type: ignore[import-untyped]
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from stalwart.master.db.migrate import SCHEMA_CACHE_VARIABLE

PG_URL = os.environ.get("STALWART_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

TESTS = Path(__file__).resolve().parent
SERIAL_GROUPS: dict[str, tuple[str, ...]] = {
    "real-slurm": ("tests/slurm/test_master_", "tests/slurm/test_real_slurm.py"),
    "browser": ("tests/ui/",),
    "fixed-paths": (
        "tests/agent/test_isolation.py",
        "tests/agent/test_identity.py",
        "tests/compat/test_det_harness_fallback.py",
    ),
}
"""Modules (by path prefix) that run on one worker, one after another: either they share one
machine-wide service (the real Slurm cluster has room for one test's jobs at a time; the
node-wide ``/run/determined`` and ``/determined_shared_fs`` that official tasks see when an
agent runs them without namespaces, which one test links under a lock of its own), or they
share package-scoped fixtures that take long to make (the browser tests' chromium, master, agent
and completed search: ``tests/ui/conftest.py``), which pytest makes once when the package's
modules run together and again for each module when other modules come between them."""
LONG_MODULES: tuple[str, ...] = (
    "tests/reliability/test_soak.py",
    "tests/compat/test_det_tutorials.py",
    "tests/reliability/test_api_fuzz.py",
    "tests/launch/test_deepspeed.py",
    "tests/compat/test_det_models.py",
    "tests/compat/test_det_templates.py",
    "tests/compat/test_det_groups.py",
    "tests/reliability/test_master_kill.py",
    "tests/reliability/test_workers.py",
    "tests/compat/test_det_workflows.py",
    "tests/compat/test_det_logs_filters.py",
    "tests/reliability/test_agent_kill.py",
)
"""Modules that take minutes with few tests, longest first (seconds on one busy worker, from
``--durations``, 2026-12-04: the soak 200, the tutorials 175 with the harness's first build,
the API fuzz 120, DeepSpeed 135 with its first build, the rest 75-90; the three-worker
master's 95 on a busy machine, 2026-12-05): started right after the
serial groups, in this order, so that none of them is what the run still waits for at its end
(modules are otherwise handed out by their number of tests). ``make test`` prints the slowest
tests: keep this list in step with them."""
PORT_OFFSETS_PER_WORKER = 50
"""Port offsets between two workers' masters (50 offsets: 1,000 ports above each base)."""
PORT_OFFSET_VARIABLE = "STALWART_CLUSTER__TASK_PORT_OFFSET"


SCHEMA_CACHE = TESTS.parent / ".cache" / "sqlite-schema"
"""Where new SQLite databases of test masters get their schema from
(``STALWART_SQLITE_SCHEMA_CACHE``, :func:`stalwart.master.db.migrate.copy_cached_schema`):
running the migrations costs 0.4 s of CPU a master, and the suite opens thousands."""


def pytest_configure(config: pytest.Config) -> None:
    """Give this xdist worker's masters (subprocesses inherit the variables) their port range,
    and every master the schema cache."""
    os.environ.setdefault(SCHEMA_CACHE_VARIABLE, str(SCHEMA_CACHE))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        os.environ.setdefault(PORT_OFFSET_VARIABLE, str(PORT_OFFSETS_PER_WORKER * int(worker[2:])))


def _group(nodeid: str) -> str:
    """The scheduling group of a test: its serial group, else its module."""
    module = nodeid.split("::", 1)[0]
    for group, prefixes in SERIAL_GROUPS.items():
        if module.startswith(prefixes):
            return group
    return module


class _ModuleGroups(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
    """``--dist loadfile``, except that the modules of a serial group go to one worker."""

    def _split_scope(self, nodeid: str) -> str:
        return _group(nodeid)


def _start_rank(item: pytest.Item) -> tuple[int, int]:
    """0 for serial groups, 1 for :data:`LONG_MODULES` (then their place in it), 2 for the rest."""
    group = _group(item.nodeid)
    if group in SERIAL_GROUPS:
        return (0, 0)
    for place, prefix in enumerate(LONG_MODULES):
        if group.startswith(prefix):
            return (1, place)
    return (2, 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Serial groups first, then :data:`LONG_MODULES` in their order, then the rest, groups with
    the most tests first (a stable sort, the same on every worker): each serial group's modules
    run one after another on one worker, the longest chains of the run, so they should start at
    once; long modules next, so that the run does not end on one; then the largest modules first,
    as xdist itself orders them, so that small ones fill the workers at the end."""
    sizes = Counter(_group(item.nodeid) for item in items)
    items.sort(key=lambda item: (_start_rank(item), -sizes[_group(item.nodeid)]))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling | None:
    """Schedule ``--dist loadfile`` runs by :func:`_group` (other modes: xdist's own), in the
    order :func:`pytest_collection_modifyitems` gives: xdist's own reordering (by number of
    tests, ``--loadscope-reorder``, on by default) would send the long modules, which have few
    tests, last."""
    if config.getvalue("dist") != "loadfile":
        return None
    config.option.loadscopereorder = False
    return _ModuleGroups(config, log)


@contextmanager
def private_pg_schema() -> Iterator[str]:
    """A PostgreSQL URL whose schema is private to the block (dropped afterwards), for
    fixtures of any scope.

    Skips when PostgreSQL is unreachable, except under CI=true, where it fails.
    """
    base = PG_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        engine = create_engine(base)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_URL} is required under CI=true: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable: {exc}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f'create schema "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'drop schema "{schema}" cascade'))
        engine.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose schema is private to this test (:func:`private_pg_schema`)."""
    with private_pg_schema() as url:
        yield url
