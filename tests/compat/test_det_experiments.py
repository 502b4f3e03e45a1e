"""The official ``det`` CLI runs a real experiment on Stalwart: master, agent, Core API trial.

``det experiment create -f`` is what a Determined user types first; it must submit the unchanged
example, stream the first trial's logs (the official client parses every log line, so a level or
field the client does not know would break it), and end when the trial ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess

pytestmark = pytest.mark.compat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "core_api"


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    """A local agent with two slots, attached to the module's master."""
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    cluster.start_agent("compat", slots=2)
    try:
        yield cluster
    finally:
        cluster.stop_agent("compat")


def test_experiment_create_follow_runs_the_example_to_completion(
    det: Det, agent: LocalCluster
) -> None:
    det.login("admin", "")
    done = det.run(
        "experiment", "create", str(EXAMPLES / "1_metrics.yaml"), str(EXAMPLES), "-f", timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Created experiment" in done.stdout
    assert "completed" in done.stdout
    assert "Trial log stream ended" in done.stdout
    listed = det.ok("experiment", "list").stdout
    assert "COMPLETED" in listed
