"""The trial and cluster pages in a real browser: metric and system-metric charts hold what the
API reports, checkpoints, logs that follow a running trial with rank and level filters, agents
and slots with what runs on them, and the job queue by priority."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster, wait_for
from tests.integration.conftest import free_port
from tests.ui.conftest import ROOT, admin_headers, in_ci, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHATTY = """\
import time

for i in range(1, 241):
    level = "WARNING" if i % 5 == 0 else "INFO"
    print(f"[rank={i % 2}] {level}: tick {i}", flush=True)
    time.sleep(0.25)
"""
"""A trial that logs a line every quarter second for a minute: odd lines from rank 1, even
lines from rank 0, every fifth line a WARNING."""


def chatty_config(name: str, trials: int, priority: int | None = None) -> dict[str, object]:
    config: dict[str, object] = {
        "name": name,
        "entrypoint": "python3 chatty.py",
        "hyperparameters": {"x": {"type": "int", "minval": 1, "maxval": 9}},
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": trials,
            "max_concurrent_trials": trials,
        },
        "max_restarts": 0,
    }
    if priority is not None:
        config["resources"] = {"priority": priority}
    return config


@pytest.fixture
def busy(
    client: Client, asha: Experiment, tmp_path: Path
) -> Iterator[tuple[Experiment, Experiment, Experiment]]:
    """Two chatty trials on the agent's two slots, then two one-trial experiments queued
    behind them: priority 60 first, priority 10 second. Killed at the end."""
    context = tmp_path / "chatty"
    context.mkdir()
    (context / "chatty.py").write_text(CHATTY)
    made: list[Experiment] = []
    try:
        made.append(client.create_experiment(chatty_config("ui-chatty", 2), context))
        # Only once both chatty trials hold the slots: created at once, the urgent one would
        # take a slot first (the priority scheduler), and the page would show another queue.
        wait_for(lambda: _busy_slots(client) == 2, 60, "both chatty trials to start")
        made.append(client.create_experiment(chatty_config("ui-low", 1, 60), context))
        made.append(client.create_experiment(chatty_config("ui-high", 1, 10), context))
        yield made[0], made[1], made[2]
    finally:
        for exp in made:
            exp.kill()


def _busy_slots(client: Client) -> int:
    return sum(
        1
        for agent in client.list_agents()
        for slot in (agent.slots or {}).values()
        if slot.container is not None
    )


def system_counts(url: str, trial_id: int) -> dict[tuple[str, ...], int]:
    """``(group, *keys)`` -> points reported, for the trial's profiler groups (from the API)."""
    headers = admin_headers(url)
    names = httpx.get(f"{url}/api/v1/ui/trials/{trial_id}/metric-names", headers=headers).json()
    out: dict[tuple[str, ...], int] = {}
    for entry in names["groups"]:
        if entry["group"] in {"training", "validation"}:
            continue
        answer = httpx.get(
            f"{url}/api/v1/ui/trials/{trial_id}/series",
            params={"group": entry["group"]},
            headers=headers,
        ).json()
        for series in answer["series"]:
            out[(entry["group"], *series["path"])] = series["total"]
    return out


def test_trial_page_charts_and_checkpoints(
    page: Page, cluster: LocalCluster, asha: Experiment, artifacts: Path
) -> None:
    """From the experiment's trials table to a trial: one chart per metric with a training and
    a validation line holding every reported point, the profiler's system metrics (one line per
    agent), the checkpoints the API lists, and the trial's log."""
    from playwright.sync_api import expect

    trial = max(asha.trials(), key=lambda t: t.id)
    # These trials ran as plain processes (nothing pulled); as if an engine had pulled the
    # image of the trial's run for 12.34 s (what agents with an engine and Kubernetes store):
    with sqlite3.connect(cluster.home / "master.db") as db:
        task_id = db.execute("SELECT task_id FROM trials WHERE id = ?", (trial.id,)).fetchone()[0]
        db.execute(
            "UPDATE allocations SET pull_seconds = 12.34 WHERE id = (SELECT id FROM allocations"
            " WHERE task_id = ? ORDER BY start_time DESC LIMIT 1)",
            (task_id,),
        )
    # A line of the trial as its node ships it: Determined's default log policy labels it.
    oom = {"taskId": task_id, "log": "RuntimeError: CUDA out of memory.\n", "agentId": "ui"}
    httpx.post(
        f"{cluster.url}/api/v1/task/logs",
        headers=admin_headers(cluster.url),
        json={"logs": [oom]},
    ).raise_for_status()
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{asha.id}/trials")
    page.get_by_role("link", name=f"Trial {trial.id}", exact=True).click()
    page.wait_for_url(f"**/#/trials/{trial.id}")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        f"Trial {trial.id} of experiment {asha.id}"
    )
    expect(page.locator("#summary [data-field='State']")).to_have_text("COMPLETED")
    expect(page.locator("#summary [data-field='Image pull']")).to_have_text(re.compile(r"^12\.3 s"))
    expect(page.locator("#summary [data-field='Log policy']")).to_have_text("CUDA OOM")

    loss = page.locator("#metric-charts figure[data-key='loss']")
    for group in ("training", "validation"):
        count = sum(1 for r in trial.metrics(group) if not r.archived)
        series = loss.locator(f"li.series[data-series-id='{group}']")
        expect(series).to_have_attribute("data-points", str(count))
        expect(series).to_have_attribute("data-drawn", str(count))

    # System metrics: the profiler's groups, a chart per metric, a line per agent.
    expected = system_counts(cluster.url, trial.id)
    assert any(key[0] == "cpu" for key in expected), expected
    for (group, *where, leaf), count in expected.items():
        chart = page.locator(f"#system-charts figure[data-key='{group}/{leaf}']")
        line = " · ".join(where) or group
        item = chart.locator(f"li.series[data-series-id='{line}']")
        expect(item).to_have_attribute("data-points", str(count))
        expect(item).to_have_attribute("data-drawn", str(count))
    expect(page.locator("#system-empty")).to_be_hidden()

    listed = httpx.get(
        f"{cluster.url}/api/v1/trials/{trial.id}/checkpoints", headers=admin_headers(cluster.url)
    ).json()["checkpoints"]
    kept = [c for c in listed if c["state"] != "STATE_DELETED"]  # DELETED ones are hidden
    expect(page.locator("#checkpoints tbody tr")).to_have_count(len(kept))
    expect(page.locator("#logs .log-line").first).to_be_visible()
    expect(page.locator("#log-status")).to_contain_text("the trial has ended")
    page.screenshot(path=artifacts / "09-trial.png", full_page=True)
    page.locator("#theme-toggle").click()
    page.screenshot(path=artifacts / "10-trial-other-theme.png", full_page=True)


def test_live_logs_cluster_and_queue(
    page: Page,
    cluster: LocalCluster,
    busy: tuple[Experiment, Experiment, Experiment],
    artifacts: Path,
) -> None:
    """While trials run: the cluster page shows each slot's task and the queue puts priority 10
    ahead of priority 60; a running trial's log follows new lines without a reload and its rank
    and level filters keep only the matching lines."""
    from playwright.sync_api import expect

    chatty = busy[0]
    sign_in(page, cluster.url)
    page.get_by_role("link", name="Cluster").click()
    page.wait_for_url("**/#/cluster")
    expect(page.locator("#agents tbody tr")).to_have_count(1)
    expect(page.locator("#agents tbody tr td").nth(3)).to_have_text("2 of 2 in use", timeout=60_000)
    expect(page.locator("#slots td.busy")).to_have_count(2)
    queue = page.locator("#queue tbody tr")
    expect(queue).to_have_count(4, timeout=60_000)
    tasks = queue.locator("td:nth-child(2)").all_inner_texts()
    states = queue.locator("td:nth-child(6)").all_inner_texts()
    priorities = [int(p) for p in queue.locator("td:nth-child(3)").all_inner_texts()]
    assert priorities == sorted(priorities)
    assert states.count("Running") == 2
    assert states.count("Queued") == 2
    queued = [t for t, s in zip(tasks, states, strict=True) if s == "Queued"]
    assert len(queued) == 2
    assert priorities[tasks.index(queued[0])] == 10
    page.screenshot(path=artifacts / "11-cluster.png", full_page=True)

    # A running trial's logs follow.
    trial = chatty.trials()[0]
    page.goto(f"{cluster.url}/#/trials/{trial.id}")
    lines = page.locator("#logs .log-line")
    expect(lines.filter(has_text=re.compile(r"tick \d+$")).first).to_be_visible(timeout=60_000)
    seen = lines.count()
    expect(page.locator("#log-status")).to_contain_text("Following")
    # Polled from Python: the page's CSP forbids the eval a wait_for_function string needs.
    expect(lines.nth(seen + 7)).to_be_attached(timeout=60_000)
    # Rank 1 only: odd ticks.
    page.get_by_label("Rank").select_option("1")
    expect(lines.first).to_be_visible(timeout=30_000)
    expect(lines.nth(2)).to_be_attached()
    for text in lines.all_inner_texts()[:20]:
        assert int(text.rsplit(" ", 1)[1]) % 2 == 1, text
    # Warnings and above (every fifth tick; odd ones on rank 1).
    page.get_by_label("Level").select_option("WARNING")
    expect(lines.first).to_contain_text("WARNING")
    for text in lines.all_inner_texts()[:20]:
        assert "WARNING" in text, text
        assert int(text.rsplit(" ", 1)[1]) % 5 == 0, text
    page.screenshot(path=artifacts / "12-trial-live-logs.png", full_page=True)


CONTRAST = """() => {
    const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
    const lum = (c) => {
        const [r, g, b] = rgb(c).map((v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const ratio = (a, b) => {
        const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
        return (x + 0.05) / (y + 0.05);
    };
    const bg = getComputedStyle(document.body).backgroundColor;
    const out = {};
    for (const sel of ["body", "th", "a", "#who", ".muted"]) {
        const node = document.querySelector(sel);
        if (node) out[sel] = ratio(getComputedStyle(node).color, bg);
    }
    return out;
}"""


def test_keyboard_and_contrast(page: Page, cluster: LocalCluster, asha: Experiment) -> None:
    """Tab reaches the skip link first, then the main navigation, and Enter follows a link; text
    keeps a contrast of at least 4.5:1 (WCAG AA) in both themes."""
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.reload()  # a fresh load: Tab starts at the top of the page
    expect(page.locator("#experiments")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Tab")  # the brand
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Experiments", exact=True)).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Tasks", exact=True)).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Cluster")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url("**/#/cluster")
    expect(page.get_by_role("heading", name="Cluster", exact=True)).to_be_visible()
    for _ in range(2):
        ratios: dict[str, float] = page.evaluate(CONTRAST)
        theme = page.evaluate("document.documentElement.dataset.theme")
        assert ratios, theme
        for selector, ratio in ratios.items():
            assert ratio >= 4.5, f"{selector} has contrast {ratio:.2f} in the {theme} theme"
        page.locator("#theme-toggle").click()


def _sinfo_answers() -> bool:
    try:
        done = subprocess.run(
            ["sinfo", "--noheader"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


@pytest.fixture
def slurm_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A master with the Slurm resource manager on this machine's Slurm (no agents, no jobs).

    Without a Slurm that answers ``sinfo`` the test is skipped, except under ``CI=true``, where
    ``scripts/slurm/setup.sh`` starts one and the test fails if it cannot."""
    if not _sinfo_answers():
        if not in_ci():
            pytest.skip("no running Slurm: start one with `sudo scripts/slurm/setup.sh`")
        setup = ROOT / "scripts" / "slurm" / "setup.sh"
        done = subprocess.run(
            ["bash", str(setup)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env=dict(os.environ),
        )
        if not _sinfo_answers():
            pytest.fail(f"CI=true needs Slurm and {setup} could not start it:\n{done.stderr}")
    config = tmp_path / "master.yaml"
    config.write_text(
        "cluster:\n  tick: 0.5\n"
        "resource_manager:\n  type: slurm\n"
        f"  job_storage_root: {tmp_path / 'jobs'}\n  poll_interval: 0.5\n"
    )
    cluster = LocalCluster(home=tmp_path / "home", port=free_port(), master_config=config)
    cluster.start_master()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_cluster_page_on_slurm(page: Page, slurm_cluster: LocalCluster, artifacts: Path) -> None:
    """Under the Slurm resource manager the cluster page lists the partitions (the master's
    resource pools) instead of agents."""
    from playwright.sync_api import expect

    pools = httpx.get(
        f"{slurm_cluster.url}/api/v1/resource-pools", headers=admin_headers(slurm_cluster.url)
    ).json()["resourcePools"]
    assert pools, "sinfo answers, so the master has at least one partition"
    sign_in(page, slurm_cluster.url)
    page.goto(f"{slurm_cluster.url}/#/cluster")
    expect(page.get_by_role("heading", name="Slurm partitions")).to_be_visible()
    expect(page.locator("#slurm-note")).to_be_visible()
    rows = page.locator("#pools tbody tr")
    expect(rows).to_have_count(len(pools))
    for pool in pools:
        row = page.locator(f"#pools tr[data-key='{pool['name']}']")
        expect(row.locator("td").nth(1)).to_have_text("SLURM")
    expect(page.locator("#agents-section")).to_be_hidden()
    page.screenshot(path=artifacts / "14-cluster-slurm.png", full_page=True)


def test_cluster_page_on_pbs(page: Page, tmp_path: Path, artifacts: Path) -> None:
    """Under the PBS resource manager the cluster page lists the queues the master reads from
    ``qstat -Q`` and ``pbsnodes`` (a real master and the real PBS client, on the fake PBS
    server of the PBS tests), with their nodes and slots."""
    from playwright.sync_api import expect

    from stalwart.hpc.pbs.client import PbsClient
    from stalwart.master.rm.hpc.manager import PbsManager
    from tests.master.conftest import make_settings
    from tests.master.test_allocations_api import live_server
    from tests.slurm.test_pbs_pools import _fake

    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "pbs",
            "job_storage_root": str(tmp_path / "jobs"),
            "master_url": "http://head:8080",
        },
    )
    with live_server(settings) as live:
        live.state.rm = PbsManager(live.state, client=PbsClient(_fake().runner))
        sign_in(page, live.url)
        page.goto(f"{live.url}/#/cluster")
        expect(page.get_by_role("heading", name="PBS queues")).to_be_visible()
        expect(page.locator("#slurm-note")).to_contain_text("PBS batch jobs")
        expect(page.locator("#pools thead th").first).to_have_text("Queue")
        expect(page.locator("#pools tbody tr")).to_have_count(3)  # not the disabled or routing
        gpus = page.locator("#pools tr[data-key='gpuq']")
        expect(gpus.locator("td").nth(1)).to_have_text("PBS")
        expect(gpus.locator("td").nth(2)).to_have_text("CUDA")
        expect(gpus.locator("td").nth(3)).to_have_text("2")  # nodes
        expect(page.locator("#pools tr[data-key='workq'] td").first).to_have_text("workq (default)")
        expect(page.locator("#agents-section")).to_be_hidden()
        page.screenshot(path=artifacts / "15-cluster-pbs.png", full_page=True)
