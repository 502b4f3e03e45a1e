"""Debugging a run in a real browser against a real master and agent: a failed experiment's and
trial's cause first (error banners from the cause endpoints), the trial's logs panel
(timestamps, server-side search, follow toggle, download with the current filters), and the
experiment page's tabs (trials sorted and filtered, checkpoints copied, registered and deleted,
the model definition, the config, notes, editing name, description and labels)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.ui.conftest import CORE_API, admin_headers, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

FAILING = """\
import sys

for i in range(1, 31):
    print(f"INFO: step {i} Needle{i % 3}", flush=True)
print("Traceback (most recent call last):", file=sys.stderr, flush=True)
print("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr, flush=True)
sys.exit(3)
"""
"""A trial that logs 30 lines (ten of each ``Needle0``, ``Needle1``, ``Needle2``), then a CUDA
out-of-memory error on stderr, and exits with code 3."""


@pytest.fixture(scope="module")
def failed(client: Client, tmp_path_factory: pytest.TempPathFactory) -> Experiment:
    """A one-trial experiment whose trial fails (no restarts), with a categorical string
    hyperparameter."""
    context = tmp_path_factory.mktemp("failing")
    (context / "fail.py").write_text(FAILING)
    config: dict[str, Any] = {
        "name": "ui-failing",
        "entrypoint": "python3 fail.py",
        "hyperparameters": {"optimizer": {"type": "categorical", "vals": ["adam"]}},
        "searcher": {"name": "random", "metric": "loss", "max_trials": 1},
        "max_restarts": 0,
    }
    exp = client.create_experiment(config, context)
    state = exp.wait(timeout=180, interval=0.2)
    assert state == "ERROR", state
    return exp.reload()


def _get(url: str, path: str, **params: Any) -> Any:
    answer = httpx.get(f"{url}/api/v1{path}", params=params, headers=admin_headers(url))
    answer.raise_for_status()
    return answer.json()


def test_failed_runs_show_their_cause_first(
    page: Page, cluster: LocalCluster, failed: Experiment, asha: Experiment, artifacts: Path
) -> None:
    """The experiment and trial pages of a failed run open on an error banner: state, exit
    code, the log policy's label (CUDA OOM), the last error lines, a way to the logs; a run
    that did not fail has none. Categorical values show without JSON quotes."""
    from playwright.sync_api import expect

    cause = _get(cluster.url, f"/ui/experiments/{failed.id}/cause")
    first = cause["firstErroredTrial"]
    assert first is not None
    trial_id = first["trialId"]
    assert first["failure"]["exitCode"] == 3
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{failed.id}")
    banner = page.locator("#cause")
    expect(banner).to_be_visible()
    expect(banner.get_by_role("heading")).to_have_text(
        f"Experiment {failed.id} failed: 1 trial errored"
    )
    expect(banner.locator("[data-field='state']")).to_have_text("ERROR")
    expect(banner.locator("[data-field='exit']")).to_have_text("it exited with code 3")
    expect(banner.locator(".cause-label")).to_contain_text(["CUDA OOM"])
    expect(banner.locator("#cause-lines")).to_contain_text("RuntimeError: CUDA out of memory")
    # The banner comes before the summary.
    assert page.locator("#cause, #summary").first.get_attribute("id") == "cause"
    page.screenshot(path=artifacts / "20-experiment-failed.png", full_page=True)

    banner.get_by_role("link", name=f"Logs of trial {trial_id}").click()
    page.wait_for_url(f"**/#/trials/{trial_id}?logs=1")
    trial_banner = page.locator("#cause")
    expect(trial_banner.get_by_role("heading")).to_have_text(f"Trial {trial_id} failed")
    expect(trial_banner.locator("[data-field='exit']")).to_have_text("it exited with code 3")
    expect(trial_banner.locator(".cause-label")).to_contain_text(["CUDA OOM"])
    expect(page.locator("#logs")).to_be_focused()  # opened at the logs
    expect(page.locator("#summary [data-field='optimizer']")).to_have_text("adam")
    page.screenshot(path=artifacts / "21-trial-failed.png", full_page=True)
    page.get_by_role("link", name=f"← Experiment {failed.id}").click()
    page.get_by_role("link", name="Trials", exact=True).click()
    expect(page.locator(f"#trials tr[data-key='{trial_id}']")).to_contain_text("adam")
    assert '"adam"' not in page.locator("#trials").inner_text()

    # A completed experiment and its trials have no banner.
    page.goto(f"{cluster.url}/#/experiments/{asha.id}")
    expect(page.locator("#summary [data-field='State']")).to_have_text("COMPLETED")
    expect(page.locator("#scatter button.point")).to_have_count(4)
    expect(page.locator("#cause")).to_have_count(0)
    page.goto(f"{cluster.url}/#/trials/{min(t.id for t in asha.trials())}")
    expect(page.locator("#log-status")).to_contain_text("the trial has ended")
    expect(page.locator("#cause")).to_have_count(0)


def test_trial_logs_search_follow_and_download(
    page: Page, cluster: LocalCluster, failed: Experiment, artifacts: Path
) -> None:
    """Each log line shows its timestamp; the search box filters on the server (case-sensitive);
    Follow can be turned off; Download saves the lines of the current filters, as the download
    endpoint writes them."""
    from playwright.sync_api import expect

    trial_id = failed.trials()[0].id
    # The logs API streams NDJSON: one {"result": line} per line.
    everything = httpx.get(
        f"{cluster.url}/api/v1/trials/{trial_id}/logs", headers=admin_headers(cluster.url)
    ).text.splitlines()
    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/trials/{trial_id}")
    lines = page.locator("#logs .log-line")
    expect(page.locator("#log-status")).to_contain_text("the trial has ended")
    total = len(everything)
    assert total > 30
    expect(lines).to_have_count(total)
    stamp = lines.first.locator("time")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z ", stamp.inner_text())
    assert stamp.get_attribute("datetime")

    # Server-side search: ten lines hold "Needle1"; it is case-sensitive.
    page.get_by_label("Search (case-sensitive)").fill("Needle1")
    expect(lines).to_have_count(10)
    for text in lines.all_inner_texts():
        assert "Needle1" in text, text
    expect(page.locator("#log-status")).to_contain_text("10 lines")
    page.screenshot(path=artifacts / "22-trial-logs-search.png", full_page=True)

    # Download: the same filter, as the endpoint writes it.
    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    download = info.value
    assert download.suggested_filename == f"trial-{trial_id}-logs.txt"
    saved = Path(download.path()).read_text()
    served = httpx.get(
        f"{cluster.url}/api/v1/ui/trials/{trial_id}/logs/download",
        params={"searchText": "Needle1"},
        headers=admin_headers(cluster.url),
    ).text
    assert saved == served
    assert len(saved.splitlines()) == 10

    page.get_by_label("Search (case-sensitive)").fill("needle1")
    expect(lines).to_have_count(0)
    expect(page.locator("#log-status")).to_contain_text("0 lines")

    # Follow off: one read of what is there.
    page.get_by_label("Search (case-sensitive)").fill("")
    page.get_by_label("Follow").uncheck()
    expect(page.locator("#log-status")).to_contain_text("not following")
    expect(lines).to_have_count(total)


def test_experiment_tabs(
    page: Page, cluster: LocalCluster, client: Client, asha: Experiment, artifacts: Path
) -> None:
    """The tabs live in the address: Trials sorts by any column and filters; Checkpoints hides
    DELETED ones, copies a UUID, registers one into a new model and deletes one after a
    confirmation; Code shows the model definition's files; Config the submitted YAML; Notes
    are read-only; an unknown tab says so."""
    from playwright.sync_api import expect

    url = cluster.url
    trials = {t.id: t for t in asha.trials()}
    sign_in(page, url)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
    page.goto(f"{url}/#/experiments/{asha.id}/trials")
    rows = page.locator("#trials tbody tr")
    expect(rows).to_have_count(len(trials))

    def order() -> list[int]:
        return [int(k) for k in rows.evaluate_all("(rs) => rs.map((r) => r.dataset.key)")]

    lr = page.locator("#trials th[data-column='hp.lr']")
    lr.get_by_role("button").click()
    expect(lr).to_have_attribute("aria-sort", "ascending")
    assert order() == sorted(trials, key=lambda t: float(trials[t].hparams["lr"]))
    lr.get_by_role("button").click()
    expect(lr).to_have_attribute("aria-sort", "descending")
    assert order() == sorted(trials, key=lambda t: -float(trials[t].hparams["lr"]))
    # The order is in the address: a reload keeps it.
    assert "sort=hp.lr" in page.url
    assert "order=desc" in page.url
    page.reload()
    expect(lr).to_have_attribute("aria-sort", "descending")
    expect(rows).to_have_count(len(trials))
    assert order() == sorted(trials, key=lambda t: -float(trials[t].hparams["lr"]))
    best = page.locator("#trials th[data-column='best']")
    best.get_by_role("button").click()
    expect(best).to_have_attribute("aria-sort", "ascending")
    wire = _get(url, f"/experiments/{asha.id}/trials")["trials"]
    metric = {t["id"]: t["searcherMetricValue"] for t in wire}
    assert order() == sorted(trials, key=lambda t: (metric[t], t))
    page.screenshot(path=artifacts / "23-experiment-trials-tab.png", full_page=True)
    # The filter matches ids, states and hyperparameter values: a trial's lr as shown.
    some = min(trials)
    header = page.locator("#trials thead th").all_inner_texts()
    lr_text = page.locator(f"#trials tr[data-key='{some}'] td").nth(header.index("lr")).inner_text()
    page.get_by_label("Filter trials").fill(lr_text)
    expect(page.locator(f"#trials tr[data-key='{some}']")).to_be_visible()
    for key in order():
        cells = page.locator(f"#trials tr[data-key='{key}'] td").all_inner_texts()
        assert any(lr_text in c for c in cells), cells
    page.get_by_label("Filter trials").fill("no such trial")
    expect(rows).to_have_count(0)
    expect(page.get_by_text("No trial matches the filter.")).to_be_visible()

    # Checkpoints.
    page.get_by_role("link", name="Checkpoints", exact=True).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}/checkpoints*")
    listed = _get(url, f"/experiments/{asha.id}/checkpoints")["checkpoints"]
    kept = [c for c in listed if c["state"] != "STATE_DELETED"]
    assert len(kept) >= 2
    ckpt_rows = page.locator("#checkpoints tbody tr")
    expect(ckpt_rows).to_have_count(len(kept))
    first = ckpt_rows.first
    uuid = str(first.get_attribute("data-key"))
    first.get_by_role("button", name=re.compile("^Copy UUID")).click()
    expect(page.locator("#toast")).to_contain_text(f"Copied {uuid}")
    assert page.evaluate("navigator.clipboard.readText()") == uuid

    model = f"ui-debug-{asha.id}"
    first.get_by_role("button", name=re.compile("^Register")).click()
    dialog = page.locator("#register-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Or a new model named").fill(model)
    dialog.get_by_role("button", name="Register").click()
    expect(page.locator("#toast")).to_contain_text(f"Registered as version 1 of {model}")
    expect(dialog).to_have_count(0)
    versions = _get(url, f"/models/{model}/versions")["modelVersions"]
    assert [v["checkpoint"]["uuid"] for v in versions] == [uuid]

    last = ckpt_rows.last
    gone = str(last.get_attribute("data-key"))
    assert gone != uuid
    page.once("dialog", lambda d: d.accept())
    last.get_by_role("button", name=re.compile("^Delete")).click()
    expect(page.locator(f"#checkpoints tr[data-key='{gone}']")).to_have_count(0)
    expect(ckpt_rows).to_have_count(len(kept) - 1)
    state = _get(url, f"/checkpoints/{gone}")["checkpoint"]["state"]
    assert state == "STATE_DELETED"
    page.get_by_label("Show deleted checkpoints").check()
    shown = page.locator(f"#checkpoints tr[data-key='{gone}']")
    expect(shown.locator("td.state")).to_have_text("DELETED")
    expect(shown.get_by_role("button", name=re.compile("^Delete"))).to_be_disabled()
    page.screenshot(path=artifacts / "24-experiment-checkpoints-tab.png", full_page=True)

    # Code: the model definition's files, the picked one's text.
    page.get_by_role("link", name="Code", exact=True).click()
    page.wait_for_url(f"**/#/experiments/{asha.id}/code*")
    tree = page.locator("#file-tree")
    tree.get_by_role("button", name="3_hpsearch.py", exact=True).click()
    expect(page.locator("#file-title")).to_have_text("3_hpsearch.py")
    source = (CORE_API / "3_hpsearch.py").read_text()
    expect(page.locator("#file-content")).to_have_text(source, use_inner_text=True)
    page.screenshot(path=artifacts / "25-experiment-code-tab.png", full_page=True)

    # Config: the YAML as submitted.
    page.get_by_role("link", name="Config", exact=True).click()
    original = _get(url, f"/experiments/{asha.id}")["experiment"]["originalConfig"]
    assert page.locator("#config").text_content() == original
    page.get_by_text("Full configuration").click()
    full = json.loads(str(page.locator("#config-full").text_content()))
    assert full == _get(url, f"/experiments/{asha.id}")["experiment"]["config"]
    # Notes: edited in place, kept by the master, shown again after a reload.
    page.get_by_role("link", name="Notes", exact=True).click()
    expect(page.locator("#notes")).to_have_text("No notes.")
    page.locator("#notes-edit").click()
    notes = "lr 0.1 diverges\ntry 0.01 next"
    page.get_by_label("Notes (plain text)").fill(notes)
    page.locator("#notes-save").click()
    expect(page.locator("#notes")).to_have_text(notes, use_inner_text=True)
    assert _get(url, f"/experiments/{asha.id}")["experiment"]["notes"] == notes
    page.reload()
    expect(page.locator("#notes")).to_have_text(notes, use_inner_text=True)
    page.goto(f"{url}/#/experiments/{asha.id}/nowhere")
    expect(page.locator("#tab-missing")).to_contain_text("nowhere")

    # The cluster page names its slots so that they cannot add up.
    page.goto(f"{url}/#/cluster")
    expect(page.locator("#pools [data-field='slots']").first).to_have_text(
        re.compile(r"^\d+ of \d+ slots? busy$")
    )


def test_edit_name_description_and_labels(
    page: Page, cluster: LocalCluster, failed: Experiment
) -> None:
    """Edit saves name, description and labels through PATCH /api/v1/experiments/ID; the page
    and the API show them."""
    from playwright.sync_api import expect

    sign_in(page, cluster.url)
    page.goto(f"{cluster.url}/#/experiments/{failed.id}")
    # The error banner loads after the page and moves the actions down: click once it is in.
    expect(page.locator("#cause")).to_be_visible()
    page.get_by_role("button", name="Edit", exact=True).click()
    form = page.locator("#edit-experiment")
    form.get_by_label("Name").fill("ui-failing-renamed")
    form.get_by_label("Description").fill("OOM on purpose")
    form.get_by_label("Labels (comma-separated)").fill("oom, debug , oom")
    form.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(
        f"Experiment {failed.id}: ui-failing-renamed"
    )
    expect(page.locator("#description")).to_have_text("OOM on purpose")
    expect(page.locator("#summary [data-field='Labels']")).to_have_text("oom, debug")
    saved = _get(cluster.url, f"/experiments/{failed.id}")["experiment"]
    assert saved["name"] == "ui-failing-renamed"
    assert saved["description"] == "OOM on purpose"
    assert saved["labels"] == ["oom", "debug"]


def test_banner_and_tabs_fit_a_phone(
    page: Page, cluster: LocalCluster, failed: Experiment, artifacts: Path
) -> None:
    """At 390 px the failure banner, the tabs and the trials table fit the viewport: the page
    does not scroll sideways (wide tables and error lines scroll in their own boxes)."""
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 390, "height": 900})
    sign_in(page, cluster.url)
    for tab in ("", "/trials", "/config"):
        page.goto(f"{cluster.url}/#/experiments/{failed.id}{tab}")
        expect(page.locator("#cause")).to_be_visible()
        expect(page.locator("#experiment-tabs a[aria-current='page']")).to_have_count(1)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{tab or 'overview'} is {width} px wide"
    page.screenshot(path=artifacts / "26-experiment-failed-390px.png", full_page=True)
