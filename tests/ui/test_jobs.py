"""The job queue page (#/jobs) against the package's real master and agent (two CPU slots):
three two-slot commands, one holding the slots and two queued behind it, are listed in the
scheduler's order; setting a queued one's priority and Move ahead reorder the queue as
`/api/v1/job-queues-v2` then serves it; a user who may not change a job is shown the master's
refusal. On a master without agents, where a dozen commands wait, the queue is read a page at
a time (the page never asks for the whole queue), pages forward keeping the scheduler's order, moves
the first job of page 2 ahead of the last of page 1, and keeps its page and size in the address.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from stalwart.client import Client, InteractiveTask
from stalwart.local import LocalCluster
from tests.ui.conftest import admin_headers, master_with_user, sign_in
from tests.ui.test_org import sign_in_as

if TYPE_CHECKING:
    from playwright.sync_api import Page

OUTSIDER = "jobs-outsider"
OUTSIDER_PASSWORD = "outsider-pass-1"


@pytest.fixture(scope="module")
def commands(client: Client) -> Iterator[list[InteractiveTask]]:
    """Three sleeping commands of two slots each at priority 42: the first holds both slots."""
    made: list[InteractiveTask] = []
    try:
        for name in ("first", "second", "third"):
            config = {"description": f"queue {name}", "resources": {"slots": 2, "priority": 42}}
            made.append(client.launch_command(["sleep", "600"], config))
        made[0].wait_ready(timeout=120, interval=0.2)
        yield made
    finally:
        for task in made:
            if not task.reload().ended:
                task.kill()


def queue(url: str) -> list[dict[str, Any]]:
    """The default pool's jobs, in the scheduler's order, as admin sees them."""
    answer = httpx.get(f"{url}/api/v1/job-queues-v2", headers=admin_headers(url))
    assert answer.status_code == 200, answer.text
    return [j["full"] for j in answer.json()["jobs"]]


def test_the_job_queue(
    page: Page, cluster: LocalCluster, commands: list[InteractiveTask], artifacts: Path
) -> None:
    from playwright.sync_api import expect

    url = cluster.url
    _, second, third = commands
    jobs = {j["entityId"]: j for j in queue(url)}
    ids = [jobs[t.id]["jobId"] for t in commands]
    assert [j["jobId"] for j in queue(url)] == ids

    sign_in(page, url)
    page.get_by_role("link", name="Jobs", exact=True).click()
    expect(page.get_by_role("heading", name="Job queue", exact=True)).to_be_visible()
    table = page.locator("section[data-pool] table").first
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    for row, job_id in zip([rows.nth(i) for i in range(3)], ids, strict=True):
        expect(row).to_have_attribute("data-key", job_id)
    expect(rows.nth(0).locator("td").nth(3)).to_have_text("SCHEDULED")
    expect(rows.nth(1).locator("td").nth(3)).to_have_text("QUEUED")
    expect(rows.nth(0).locator("td").nth(5)).to_have_text("2/2")
    page.screenshot(path=str(artifacts / "42-jobs.png"), full_page=True)

    def order() -> list[str]:
        return [j["jobId"] for j in queue(url)]

    def shown(expected: list[str]) -> None:
        for i, job_id in enumerate(expected):
            expect(rows.nth(i)).to_have_attribute("data-key", job_id)

    # a smaller priority number puts the third command ahead of the second (and of the first,
    # whose priority is 42 too: the order is the scheduler's, running jobs included)
    label = f"command {third.id}"
    page.get_by_role("textbox", name=f"Priority of {label}").fill("40")
    page.get_by_role("button", name=f"Set the priority of {label}").click()
    expect(page.locator("#toast")).to_contain_text(f"Done: set the priority of {label}")
    assert {j["jobId"]: j["priority"] for j in queue(url)}[ids[2]] == 40
    now = order()
    assert now.index(ids[2]) < now.index(ids[1])
    shown(now)

    # Move ahead: the second command goes before the job shown above it
    above = now[now.index(ids[1]) - 1]
    page.get_by_role("button", name=f"Move command {second.id} ahead").click()
    expect(page.locator("#toast")).to_contain_text(f"Done: move command {second.id} ahead")
    moved = order()
    assert moved.index(ids[1]) < moved.index(above)
    shown(moved)
    page.screenshot(path=str(artifacts / "43-jobs-moved.png"), full_page=True)

    # another user may not change admin's jobs: the master's refusal is shown
    made = httpx.post(
        f"{url}/api/v1/users",
        json={"user": {"username": OUTSIDER, "active": True}, "password": OUTSIDER_PASSWORD},
        headers=admin_headers(url),
    )
    assert made.status_code == 200, made.text
    page.get_by_role("button", name="Sign out").click()
    sign_in_as(page, url, OUTSIDER, OUTSIDER_PASSWORD)
    page.goto(f"{url}/#/jobs")
    expect(rows).to_have_count(3)
    before = queue(url)
    page.get_by_role("textbox", name=f"Priority of {label}").fill("30")
    page.get_by_role("button", name=f"Set the priority of {label}").click()
    expect(page.locator("#jobs-error")).to_contain_text(
        f"Not allowed to set the priority of {label}"
    )
    page.screenshot(path=str(artifacts / "44-jobs-forbidden.png"), full_page=True)
    assert queue(url) == before


WAITING = 12
"""Commands waiting in the agentless master's queue: more than the smallest page (10)."""
DASH = "\N{EN DASH}"


@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A master without agents where ``WAITING`` one-slot commands wait; its address."""
    home = tmp_path_factory.mktemp("ui-jobs-paging")
    with master_with_user(home, OUTSIDER, OUTSIDER_PASSWORD) as url:
        headers = admin_headers(url)
        for n in range(WAITING):
            body = {"config": {"entrypoint": "sleep 600", "description": f"waiting {n}"}}
            made = httpx.post(f"{url}/api/v1/commands", json=body, headers=headers)
            assert made.status_code == 200, made.text
        yield url


def test_the_job_queue_in_pages(page: Page, waiting: str, artifacts: Path) -> None:
    from playwright.sync_api import expect

    url = waiting
    jobs = queue(url)
    assert len(jobs) == WAITING
    ids = [j["jobId"] for j in jobs]
    label = {j["jobId"]: f"command {j['entityId']}" for j in jobs}
    asked: list[dict[str, list[str]]] = []
    page.on(
        "request",
        lambda r: (
            asked.append(parse_qs(urlparse(r.url).query)) if "job-queues-v2" in r.url else None
        ),
    )

    sign_in(page, url)
    page.goto(f"{url}/#/jobs?size=10")
    rows = page.locator("section[data-pool='default'] tbody tr")
    expect(rows).to_have_count(10)
    for i in range(10):
        expect(rows.nth(i)).to_have_attribute("data-key", ids[i])
    pager = page.locator("#jobs-pager-default")
    expect(pager).to_contain_text(f"1{DASH}10 of 12 jobs (page 1 of 2)")
    expect(page.get_by_role("button", name="Previous page of pool default")).to_be_disabled()
    # every read is a page (and its neighbours), never the whole queue
    assert asked
    assert all(int(q["limit"][0]) <= 12 and "offset" in q for q in asked), asked

    page.get_by_role("button", name="Next page of pool default").click()
    expect(page).to_have_url(f"{url}/#/jobs?size=10&page-default=2")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-key", ids[10])
    expect(rows.nth(1)).to_have_attribute("data-key", ids[11])
    expect(rows.nth(0).locator("td").first).to_have_text("11")
    expect(pager).to_contain_text(f"11{DASH}12 of 12 jobs (page 2 of 2)")
    expect(page.get_by_role("button", name="Next page of pool default")).to_be_disabled()
    assert all(int(q["limit"][0]) <= 12 for q in asked), asked

    # the first job of page 2 moves ahead of the last one of page 1, which it knows
    first = ids[10]
    page.get_by_role("button", name=f"Move {label[first]} ahead").click()
    expect(page.locator("#toast")).to_contain_text(f"Done: move {label[first]} ahead")
    moved = [j["jobId"] for j in queue(url)]
    assert moved.index(first) < moved.index(ids[9])
    expect(rows.nth(0)).to_have_attribute("data-key", moved[10])
    expect(rows.nth(1)).to_have_attribute("data-key", moved[11])
    page.screenshot(path=str(artifacts / "85-jobs-paged.png"), full_page=True)

    # the page is kept across a reload; another size starts over on one page
    page.reload()
    expect(rows).to_have_count(2)
    expect(pager).to_contain_text(f"11{DASH}12 of 12 jobs (page 2 of 2)")
    page.get_by_label("Jobs per page").select_option("25")
    expect(rows).to_have_count(WAITING)
    expect(page).to_have_url(f"{url}/#/jobs?size=25")
    expect(pager).to_contain_text(f"1{DASH}12 of 12 jobs")
    for i, job_id in enumerate(moved):
        expect(rows.nth(i)).to_have_attribute("data-key", job_id)
