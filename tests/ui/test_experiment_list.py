"""The experiments list and the compare view in a real browser against a real master: the
column picker (hyperparameters and metric summaries the master offers), sorting by a clicked
header done by the server (both directions, experiments without the metric last), paging with
the total, saved views kept in the user's web settings, bulk actions with the master's
per-experiment refusals shown, and the compare view of experiments and of trials.

The module's master has no agent: its experiments are real (created with the SDK, each with one
trial of a random search) and their validation reports are posted through
``POST /api/v1/trials/metrics/batch``, the ingest path a running trial uses, so the list's
stored best metric and summaries are the master's own. Every wait is Playwright's ``expect``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.integration.conftest import MASTER_CONFIG, free_port
from tests.ui.conftest import admin_headers, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page, Response

LISTED = 24
"""Experiments of the sort and paging tests: ``list-00`` .. ``list-23``."""
NO_METRIC = (5, 17)
"""Of those, the ones that never report a validation (their Best metric is empty)."""


@dataclass(frozen=True)
class ListMaster:
    """The module's master, an SDK client on it and its experiments by name."""

    url: str
    client: Client
    experiments: dict[str, Experiment]
    headers: dict[str, str]
    context: Path

    def search(self, **body: Any) -> list[int]:
        """The ids the master lists for a ``POST /experiments-search`` body."""
        answer = httpx.post(
            f"{self.url}/api/v1/experiments-search", json=body, headers=self.headers, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return [row["experiment"]["id"] for row in answer.json()["experiments"]]


def _config(name: str, lr: float, optimizer: str, labels: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "labels": labels,
        "entrypoint": "python3 train.py",
        "hyperparameters": {
            "lr": {"type": "const", "val": lr},
            "optimizer": {"type": "const", "val": optimizer},
        },
        "searcher": {"name": "random", "metric": "validation_loss", "max_trials": 1},
    }


def _trial_of(exp: Experiment) -> int:
    deadline = time.monotonic() + 60
    while not (trials := exp.trials()):
        assert time.monotonic() < deadline, f"experiment {exp.id} made no trial"
        time.sleep(0.1)
    return trials[0].id


def _validations(trial_id: int, losses: list[float]) -> list[dict[str, Any]]:
    return [
        {
            "group": "validation",
            "metrics": {
                "metrics": {"avgMetrics": {"validation_loss": loss, "accuracy": 1 - loss}},
                "trialId": trial_id,
                "trialRunId": 1,
                "stepsCompleted": 10 * (i + 1),
                "reportTime": "2026-01-01T00:00:00Z",
            },
        }
        for i, loss in enumerate(losses)
    ]


def report(master: ListMaster, exp: Experiment, losses: list[float]) -> int:
    """Post ``losses`` as the validation reports of ``exp``'s trial (steps 10, 20, ...)."""
    trial_id = _trial_of(exp)
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.post(
            f"{master.url}/api/v1/trials/metrics/batch",
            content=json.dumps({"reports": _validations(trial_id, losses)}),
            headers={**master.headers, "Content-Type": "application/json"},
            timeout=60,
        )
        # The loop creates a trial, then asks for its first run (run 1) in a later step of
        # the round: until then a report from run 1 is refused as a stale run's.
        if "is on run 0" not in answer.text or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer.status_code == 200, answer.text
    return trial_id


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ListMaster]:
    """A master without agents holding ``LISTED`` experiments: ``list-NN`` has ``lr`` =
    (NN * 7 % 24 + 1) / 1000 and validation losses ending at (NN * 5 % 24) / 100 (none for
    ``NO_METRIC``)."""
    home = tmp_path_factory.mktemp("ui-list")
    config = home / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=home / "home", port=free_port(), master_config=config)
    cluster.start_master()
    try:
        context = home / "context"
        context.mkdir()
        (context / "train.py").write_text("print('never runs: this master has no agent')\n")
        with Client(cluster.url, "admin", "", config_dir=home / "client", environ={}) as admin:
            master = ListMaster(cluster.url, admin, {}, admin_headers(cluster.url), context)
            for n in range(LISTED):
                lr = (n * 7 % LISTED + 1) / 1000
                name = f"list-{n:02d}"
                exp = admin.create_experiment(
                    _config(name, lr, "adam" if n % 2 else "sgd", ["listed"]), context
                )
                master.experiments[name] = exp
                if n not in NO_METRIC:
                    final = (n * 5 % LISTED) / 100
                    report(master, exp, [final + 0.3, final + 0.1, final])
            yield master
    finally:
        cluster.stop()


def rows_ids(page: Page) -> list[int]:
    """The ids of the list's rows, top to bottom."""
    keys: list[str] = page.locator("#experiments tbody tr").evaluate_all(
        "(rows) => rows.map((r) => r.dataset.key)"
    )
    return [int(k) for k in keys]


def expect_rows(page: Page, ids: list[int]) -> None:
    """Wait (bounded) until the list shows exactly ``ids`` in this order."""
    from playwright.sync_api import expect

    rows = page.locator("#experiments tbody tr")
    expect(rows).to_have_count(len(ids))
    for i, exp_id in enumerate(ids):
        expect(rows.nth(i)).to_have_attribute("data-key", str(exp_id))


LABEL_FILTER = json.dumps(
    {
        "filterGroup": {
            "kind": "group",
            "conjunction": "and",
            "children": [
                {"kind": "field", "columnName": "tags", "operator": "contains", "value": "listed"}
            ],
        },
        "showArchived": False,
    }
)
"""The master's filter for the list's ``label=listed`` (what the page sends)."""
LIVE = re.compile("ACTIVE|QUEUED|RUNNING")
"""An activated experiment's state (it queues: this master has no agent)."""
NO_VALUE = "\u2013"
"""What a cell without a value shows (an en dash)."""


def test_columns_sort_and_paging(page: Page, listed: ListMaster, artifacts: Path) -> None:
    """Hyperparameter and metric columns from the picker show the best trial's values; a
    clicked header sorts on the server both ways with missing values last; pages of 10 cover
    the list with its total."""
    from playwright.sync_api import expect

    sign_in(page, listed.url)
    page.goto(f"{listed.url}/#/experiments?label=listed&size=10")
    expect(page.locator("#experiments-count")).to_contain_text(f"{LISTED} experiments")
    expect(page.locator("#page-of")).to_have_text("Page 1 of 3")
    # The picker offers what the master's columns API offers.
    page.locator("#column-picker summary").click()
    page.locator("input[data-column='hp.lr']").check()
    page.locator("input[data-column='hp.optimizer']").check()
    page.locator("input[data-column='validation.validation_loss.min']").check()
    assert "cols=" in page.url
    exp3 = listed.experiments["list-03"]
    row = page.locator(f"#experiments tr[data-key='{exp3.id}']")
    page.get_by_role("button", name="Sort by lr").click()
    order = listed.search(sort="hp.lr=asc", filter=LABEL_FILTER, limit=10)
    expect_rows(page, order)
    row = page.locator(f"#experiments tr[data-key='{order[0]}']")
    expect(row.locator("td[data-col='hp.lr']")).to_have_text("0.001")
    # Best metric and the summary column: the best trial's values.
    page.get_by_role("button", name="Sort by validation_loss (min)").click()
    ascending = listed.search(sort="validation.validation_loss.min=asc", filter=LABEL_FILTER)
    expect_rows(page, ascending[:10])
    best = listed.experiments["list-00"]
    first = page.locator(f"#experiments tr[data-key='{best.id}']")
    expect(first.locator("td[data-col='searcherMetricsVal']")).to_have_text("0")
    expect(first.locator("td[data-col='validation.validation_loss.min']")).to_have_text("0")
    assert "sort=validation.validation_loss.min%3Dasc" in page.url
    page.screenshot(path=artifacts / "20-list-sorted-by-metric.png", full_page=True)
    # Descending, the experiments without the metric still come last: on the last page.
    page.get_by_role("button", name="Sort by validation_loss (min), descending").click()
    descending = listed.search(sort="validation.validation_loss.min=desc", filter=LABEL_FILTER)
    no_metric = {listed.experiments[f"list-{n:02d}"].id for n in NO_METRIC}
    assert set(descending[-len(NO_METRIC) :]) == no_metric
    assert set(ascending[-len(NO_METRIC) :]) == no_metric
    expect_rows(page, descending[:10])
    page.locator("#page-next").click()
    expect(page.locator("#page-of")).to_have_text("Page 2 of 3")
    page.locator("#page-next").click()
    expect(page.locator("#page-of")).to_have_text("Page 3 of 3")
    expect_rows(page, descending[20:])
    for exp_id in no_metric:
        cell = page.locator(
            f"#experiments tr[data-key='{exp_id}'] td[data-col='searcherMetricsVal']"
        )
        expect(cell).to_have_text(NO_VALUE)
    expect(page.locator("#experiments-count")).to_contain_text("showing 21" + NO_VALUE + "24")
    # A bigger page shows everything; the choice lives in the hash.
    page.get_by_label("Per page").select_option("25")
    expect_rows(page, descending)
    page.reload()
    expect_rows(page, descending)
    header = page.locator("th[data-col='validation.validation_loss.min']")
    expect(header).to_have_attribute("aria-sort", "descending")
    # Exactly one arrow on the sorted header (its text plus what CSS draws after it), none on
    # the others, and every other header says it is not sorted.
    assert arrows(header) == "\u25bc"
    expect(page.locator("th[data-col='hp.lr']")).to_have_attribute("aria-sort", "none")
    assert arrows(page.locator("th[data-col='hp.lr']")) == ""
    page.get_by_role("button", name="Sort by validation_loss (min)", exact=True).click()
    expect(header).to_have_attribute("aria-sort", "ascending")
    assert arrows(header) == "\u25b2"
    assert page.locator("#experiments th[aria-sort='ascending']").count() == 1
    assert page.locator("#experiments th[aria-sort='descending']").count() == 0


def arrows(header: Any) -> str:
    """The sort arrows a header shows: those in its text and the one CSS adds after its
    button (``::after``), in order."""
    shown: str = header.evaluate(
        """th => {
            const b = th.querySelector("button");
            const after = getComputedStyle(b, "::after").content;
            const extra = after && after !== "none" && after !== "normal" ? JSON.parse(after) : "";
            return th.textContent + extra;
        }"""
    )
    return "".join(ch for ch in shown if ch in "\u25b2\u25bc")


def test_saved_views_live_in_the_users_settings(
    page: Page, listed: ListMaster, artifacts: Path
) -> None:
    """A view saved under a name comes back, columns and sort, on a fresh list and through
    the master's user settings; deleting it removes the setting."""
    from playwright.sync_api import expect

    sign_in(page, listed.url)
    page.goto(
        f"{listed.url}/#/experiments?cols=id,name,hp.optimizer&sort=hp.lr%3Ddesc&label=listed"
    )
    order = listed.search(sort="hp.lr=desc", filter=LABEL_FILTER, limit=100)
    expect_rows(page, order)
    page.get_by_label("Save as").fill("by-lr")
    page.get_by_role("button", name="Save view").click()
    expect(page.get_by_label("Saved view", exact=True)).to_have_value("by-lr")
    stored = httpx.get(f"{listed.url}/api/v1/users/setting", headers=listed.headers).json()
    views = {s["key"]: s for s in stored["settings"] if s.get("storagePath") == "experiments-views"}
    assert json.loads(views["by-lr"]["value"])["sort"] == "hp.lr=desc"
    # A plain list, then the view.
    page.goto(f"{listed.url}/#/experiments")
    page.reload()
    expect(page.locator("th[data-col='hp.optimizer']")).to_have_count(0)
    page.get_by_label("Saved view", exact=True).select_option("by-lr")
    expect(page.locator("th[data-col='hp.optimizer']")).to_be_visible()
    expect_rows(page, order)
    assert "label=listed" in page.url
    page.screenshot(path=artifacts / "21-list-saved-view.png", full_page=True)
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete view").click()
    expect(page.get_by_label("Saved view", exact=True).locator("option")).to_have_count(1)
    stored = httpx.get(f"{listed.url}/api/v1/users/setting", headers=listed.headers).json()
    assert not [s for s in stored["settings"] if s.get("storagePath") == "experiments-views"]


GO_ON_AT_ONCE = """(target) => {
    const title = Object.getOwnPropertyDescriptor(Document.prototype, "title");
    Object.defineProperty(document, "title", {
        configurable: true,
        get() { return title.get.call(document); },
        set(value) {
            title.set.call(document, value);
            if (!value.startsWith("Experiments")) return;
            delete document.title;
            location.hash = target;
        },
    });
}"""
"""Install in the page: when the experiments list names the tab (its first effect, before the
effect that writes its choices into the address), go to ``target`` at once, as a quick user
does on a slow machine."""


def test_going_on_before_the_list_settles_stays_where_the_user_went(
    page: Page, listed: ListMaster
) -> None:
    """The list writes its choices into the address once it is shown; a user who went on to
    another page before that write ran stays there (the write is dropped), and the list's own
    writes still land while it is shown."""
    from playwright.sync_api import expect

    page.goto(f"{listed.url}/")
    page.evaluate(GO_ON_AT_ONCE, "#/models")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("")
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
    expect(page).to_have_url(re.compile(r"#/models$"))
    page.goto(f"{listed.url}/#/experiments")
    page.locator("#filter-label").fill("listed")
    expect(page).to_have_url(re.compile(r"#/experiments\?.*label=listed"))


def _state(master: ListMaster, exp_id: int) -> dict[str, Any]:
    answer = httpx.get(f"{master.url}/api/v1/experiments/{exp_id}", headers=master.headers)
    assert answer.status_code == 200, answer.text
    experiment: dict[str, Any] = answer.json()["experiment"]
    return experiment


def test_bulk_actions_with_refusals(page: Page, listed: ListMaster, artifacts: Path) -> None:
    """Select-all-on-page then pause, activate, archive (refused for live ones, with the
    master's reason per experiment), kill, archive, unarchive, move, delete and cancel."""
    from playwright.sync_api import expect

    made = [
        listed.client.create_experiment(_config(f"bulk-{n}", 0.01, "sgd", ["bulk"]), listed.context)
        for n in range(3)
    ]
    ids = sorted(e.id for e in made)
    workspace = httpx.post(
        f"{listed.url}/api/v1/workspaces", json={"name": "team"}, headers=listed.headers
    )
    assert workspace.status_code == 200, workspace.text
    workspace_id = workspace.json()["workspace"]["id"]
    project = httpx.post(
        f"{listed.url}/api/v1/workspaces/{workspace_id}/projects",
        json={"name": "moved-here", "workspaceId": workspace_id},
        headers=listed.headers,
    )
    assert project.status_code == 200, project.text
    project_id = project.json()["project"]["id"]
    page.on("dialog", lambda d: d.accept())
    sign_in(page, listed.url)
    page.goto(f"{listed.url}/#/experiments?label=bulk")
    expect_rows(page, ids[::-1])
    page.get_by_label("Select every experiment on this page").check()
    expect(page.locator("#selected-count")).to_have_text("3 selected")
    page.locator("button[data-bulk='pause']").click()
    for exp_id in ids:
        expect(
            page.locator(f"#experiments tr[data-key='{exp_id}'] td[data-col='state']")
        ).to_have_text("PAUSED")
    page.get_by_label("Select every experiment on this page").check()
    page.locator("button[data-bulk='activate']").click()
    for exp_id in ids:
        expect(
            page.locator(f"#experiments tr[data-key='{exp_id}'] td[data-col='state']")
        ).to_have_text(LIVE)
    # Archiving live experiments is refused, each with the master's reason.
    page.get_by_label("Select every experiment on this page").check()
    page.locator("button[data-bulk='archive']").click()
    refusals = page.locator("#bulk-results li")
    expect(refusals).to_have_count(3)
    for exp_id in ids:
        expect(page.locator(f"#bulk-results li[data-id='{exp_id}']")).to_contain_text(
            f"Experiment {exp_id}: "
        )
    page.screenshot(path=artifacts / "22-list-bulk-refused.png", full_page=True)
    assert not _state(listed, ids[0])["archived"]
    # Kill two, then archive them: they leave the list until "Show archived".
    page.get_by_label(f"Select experiment {ids[0]}", exact=True).check()
    page.get_by_label(f"Select experiment {ids[1]}", exact=True).check()
    page.get_by_label(f"Select experiment {ids[2]}", exact=True).uncheck()
    expect(page.locator("#selected-count")).to_have_text("2 selected")
    page.locator("button[data-bulk='kill']").click()
    for exp_id in ids[:2]:
        expect(
            page.locator(f"#experiments tr[data-key='{exp_id}'] td[data-col='state']")
        ).to_have_text("CANCELED")
    page.get_by_label(f"Select experiment {ids[0]}", exact=True).check()
    page.get_by_label(f"Select experiment {ids[1]}", exact=True).check()
    page.locator("button[data-bulk='archive']").click()
    expect_rows(page, [ids[2]])
    assert _state(listed, ids[0])["archived"]
    page.get_by_label("Show archived").check()
    expect_rows(page, ids[::-1])
    page.get_by_label(f"Select experiment {ids[0]}", exact=True).check()
    page.locator("button[data-bulk='unarchive']").click()
    page.get_by_label("Show archived").uncheck()
    expect_rows(page, [ids[2], ids[0]])
    # Move one to another project.
    page.get_by_label(f"Select experiment {ids[2]}", exact=True).check()
    page.get_by_label("Move to").select_option(str(project_id))
    page.locator("button[data-bulk='move']").click()
    page.get_by_label("Select every experiment on this page").uncheck()
    page.locator("#column-picker summary").click()
    page.locator("input[data-column='projectId']").check()
    expect(
        page.locator(f"#experiments tr[data-key='{ids[2]}'] td[data-col='projectId']")
    ).to_contain_text(str(project_id))
    assert _state(listed, ids[2])["projectId"] == project_id
    # Delete the canceled one.
    page.get_by_label(f"Select experiment {ids[0]}", exact=True).check()
    page.locator("button[data-bulk='delete']").click()
    expect_rows(page, [ids[2]])
    page.screenshot(path=artifacts / "23-list-after-bulk.png", full_page=True)
    # Cancel the moved one: it stops (no trial ran, so it ends at once or soon).
    page.get_by_label(f"Select experiment {ids[2]}", exact=True).check()
    page.locator("button[data-bulk='cancel']").click()
    state = page.locator(f"#experiments tr[data-key='{ids[2]}'] td[data-col='state']")
    expect(state).to_have_text(re.compile("CANCELED"))
    # With only the experiment's own columns the poll is a conditional GET: once nothing on the
    # page changes, the browser asks with the ETag it holds and the master answers 304 (the
    # browser then serves its copy: Playwright sees the request's If-None-Match equal to the
    # answer's ETag).
    page.goto(f"{listed.url}/#/experiments?label=bulk&state=CANCELED&archived=1")
    expect_rows(page, [ids[2], ids[1]])
    page.wait_for_event("response", predicate=_revalidated, timeout=20_000)


def _revalidated(response: Response) -> bool:
    if "/api/v1/experiments?" not in response.url:
        return False
    etag = response.all_headers().get("etag")
    return etag is not None and response.request.all_headers().get("if-none-match") == etag


def test_compare_experiments_and_trials(page: Page, listed: ListMaster, artifacts: Path) -> None:
    """Compare from the selection: one chart per metric holding a line per trial (each as
    long as its reports), and the side-by-side table with differences marked; the trials
    form of the address shows the same trials."""
    from playwright.sync_api import expect

    a, b = listed.experiments["list-01"], listed.experiments["list-02"]
    trial_a, trial_b = _trial_of(a), _trial_of(b)
    sign_in(page, listed.url)
    page.goto(f"{listed.url}/#/experiments?label=listed&size=50")
    page.get_by_label(f"Select experiment {a.id}", exact=True).check()
    page.get_by_label(f"Select experiment {b.id}", exact=True).check()
    page.locator("button[data-bulk='compare']").click()
    page.wait_for_url(f"**/#/compare?experiments={min(a.id, b.id)},{max(a.id, b.id)}")
    chart = page.locator("#compare-charts figure[data-key='validation/validation_loss']")
    lines = chart.locator("li.series")
    expect(lines).to_have_count(2)
    for trial_id in (trial_a, trial_b):
        expect(chart.locator(f"li.series[data-trial-id='{trial_id}']")).to_have_attribute(
            "data-points", "3"
        )
    expect(
        page.locator("#compare-charts figure[data-key='validation/accuracy'] li.series")
    ).to_have_count(2)
    table = page.locator("#compare-table")
    expect(table.locator("tr[data-key='hp.lr']")).to_have_attribute("data-differs", "true")
    expect(table.locator("tr[data-key='hp.optimizer']")).to_have_attribute("data-differs", "true")
    expect(table.locator("tr[data-key='state']")).to_have_attribute("data-differs", "false")
    lr_cells = table.locator("tr[data-key='hp.lr'] td")
    expect(lr_cells).to_have_count(2)
    expected_lr = {trial_a: "0.008", trial_b: "0.015"}
    heads = table.locator("thead th[data-trial-id]")
    for i in range(2):
        tid = int(heads.nth(i).get_attribute("data-trial-id") or 0)
        expect(lr_cells.nth(i)).to_have_text(expected_lr[tid])
    expect(table.locator("tr[data-key='latest.validation_loss'] td").first).not_to_have_text(
        NO_VALUE
    )
    page.screenshot(path=artifacts / "24-compare-experiments.png", full_page=True)
    page.get_by_label("Only rows that differ").check()
    expect(table.locator("tr[data-key='state']")).to_have_count(0)
    # The trials form, and a missing trial named, not a blank page.
    page.goto(f"{listed.url}/#/compare?trials={trial_a},{trial_b},999999")
    expect(
        page.locator("#compare-charts figure[data-key='validation/validation_loss'] li.series")
    ).to_have_count(2)
    expect(page.locator("#compare-missing")).to_contain_text("trial 999999")
    page.screenshot(path=artifacts / "25-compare-trials.png", full_page=True)


def test_list_and_compare_fit_a_narrow_screen(
    page: Page, listed: ListMaster, artifacts: Path
) -> None:
    """At 390 px the list's controls wrap and its table scrolls inside its box: the page itself
    never scrolls sideways; the same holds for the compare view."""
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 390, "height": 900})
    sign_in(page, listed.url)
    page.goto(f"{listed.url}/#/experiments?label=listed&size=10&cols=id,name,hp.lr,state")
    expect(page.locator("#experiments tbody tr")).to_have_count(10)
    # Without a validation there is no best trial: the first trial's value shows (as the master
    # sorts by it).
    silent = listed.experiments["list-17"]
    lr = page.locator(f"#experiments tr[data-key='{silent.id}'] td[data-col='hp.lr']")
    expect(lr).to_have_text("0.024")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=artifacts / "26-list-390px.png", full_page=True)
    a, b = listed.experiments["list-01"], listed.experiments["list-02"]
    page.goto(f"{listed.url}/#/compare?experiments={a.id},{b.id}")
    expect(page.locator("#compare-charts figure li.series")).to_have_count(4)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=artifacts / "27-compare-390px.png", full_page=True)
