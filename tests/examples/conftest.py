"""Fixtures of the example tests: one real master and agent (two CPU slots) for the package, an
SDK client logged in as admin, and helpers that submit an example as a user would, with a few
settings overridden so that each run takes seconds.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from stalwart.client import Client, Experiment, Trial
from stalwart.local import LocalCluster
from tests.client.support import running_cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_config(path: Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The example's config with ``{"a.b": value}`` overrides (what ``--config a.b=value`` of
    ``stalwart e create`` does)."""
    config: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    config = copy.deepcopy(config)
    for dotted, value in (overrides or {}).items():
        *parents, leaf = dotted.split(".")
        node = config
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return config


def trial_log(trial: Trial) -> str:
    """The trial's whole log text."""
    return "".join(line.log for line in trial.logs())


def completed(exp: Experiment, *, timeout: float = 120.0) -> list[Trial]:
    """Wait for ``exp`` to end; assert it COMPLETED (showing the first trial's logs if not), and
    return its trials."""
    state = exp.wait(timeout=timeout, interval=0.2)
    trials = exp.trials()
    if state != "COMPLETED":
        logs = trial_log(trials[0]) if trials else "(no trial)"
        raise AssertionError(f"experiment {exp.id} is {state}:\n{logs}")
    return trials


def metric_steps(trial: Trial, group: str) -> list[int]:
    """The ``steps_completed`` of each current (not superseded) report of ``group``."""
    return [r.total_batches for r in trial.metrics(group) if not r.archived]


def validation_metrics(trial: Trial) -> list[dict[str, Any]]:
    """The metrics of each current validation report, in order."""
    return [
        dict(r.metrics["validation_metrics"]) for r in trial.metrics("validation") if not r.archived
    ]


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A master and one agent with two CPU slots, shared by the example tests."""
    with running_cluster(tmp_path_factory.mktemp("examples-cluster"), slots=2) as running:
        yield running


@pytest.fixture(scope="package")
def client(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """The Python SDK, logged in as admin."""
    config_dir = tmp_path_factory.mktemp("examples-client")
    with Client(cluster.url, "admin", "", config_dir=config_dir, environ={}) as admin:
        yield admin
