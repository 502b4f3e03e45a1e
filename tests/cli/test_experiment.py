"""``stalwart experiment ...`` (and its alias ``e``) against a real master and agent."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from stalwart.client import Client, Experiment
from tests.cli.conftest import Cli, one_error_line


def _created(out: str) -> int:
    match = re.search(r"^Created experiment (\d+)$", out, re.MULTILINE)
    assert match, out
    return int(match.group(1))


def test_create_follow_and_wait(cli: Cli, model_dir: Path) -> None:
    result = cli("experiment", "create", str(model_dir / "const.yaml"), str(model_dir), "-f")
    assert result.code == 0, result.err
    exp_id = _created(result.out)
    assert "training done" in result.out  # the first trial's logs, streamed
    assert "Trial log stream ended" in result.err
    waited = cli("e", "wait", str(exp_id))
    assert waited.code == 0, waited.err
    assert waited.out.strip() == f"Experiment {exp_id}: COMPLETED"


def test_overrides_paused_and_the_whole_lifecycle(cli: Cli, model_dir: Path, admin: Client) -> None:
    config = str(model_dir / "const.yaml")
    result = cli(
        "e", "create", config, str(model_dir), "--paused", "--config", "name=overridden",
        "--config", "hyperparameters.steps=200",
    )  # fmt: skip
    assert result.code == 0, result.err
    exp_id = _created(result.out)
    exp = admin.get_experiment(exp_id)
    assert (exp.state, exp.name) == ("PAUSED", "overridden")
    assert exp.config["hyperparameters"]["steps"] == {"type": "const", "val": 200}

    for verb, done in (("activate", "Activated"), ("pause", "Paused"), ("kill", "Killed")):
        acted = cli("e", verb, str(exp_id))
        assert acted.code == 0, acted.err
        assert acted.out.strip() == f"{done} experiment {exp_id}."
    waited = cli("e", "wait", str(exp_id), "--interval", "0.1", "--timeout", "60")
    assert waited.code == 1
    assert f"Experiment {exp_id}: CANCELED" in waited.out
    assert one_error_line(waited.err) == f"error: experiment {exp_id} ended CANCELED"

    assert cli("e", "archive", str(exp_id)).code == 0
    assert exp_id not in [e["id"] for e in json.loads(cli("e", "list", "--json").out)]
    everything = cli("e", "list", "--all")
    assert re.search(rf"^{exp_id}\s+overridden \(archived\)", everything.out, re.MULTILINE)
    assert cli("e", "unarchive", str(exp_id)).code == 0
    listed = cli("e", "list")
    assert re.search(rf"^{exp_id}\s+overridden\s+admin\s+CANCELED", listed.out, re.MULTILINE)

    refused = cli("e", "delete", str(exp_id), stdin="n\n")
    assert refused.code == 1
    assert "Aborted" in refused.out + refused.err
    assert cli("e", "describe", str(exp_id)).code == 0
    deleted = cli("e", "delete", str(exp_id), "--yes")
    assert deleted.out.strip() == f"Deleted experiment {exp_id}."
    gone = cli("e", "describe", str(exp_id))
    assert gone.code == 1
    assert one_error_line(gone.err) == f"error: experiment {exp_id} not found"
    assert "hint: list experiments with `stalwart experiment list --all`" in gone.err


def test_describe_and_list_a_finished_experiment(cli: Cli, finished: Experiment) -> None:
    eid = str(finished.id)
    described = cli("experiment", "describe", eid)
    assert described.code == 0, described.err
    assert f"Experiment {finished.id}: tiny" in described.out
    assert "State: COMPLETED" in described.out
    assert "steps=4, period=2, x=0.5" in described.out
    with_metrics = cli("e", "describe", eid, "--metrics")
    assert "Validation metrics" in with_metrics.out
    data = json.loads(cli("e", "describe", eid, "--json", "--metrics").out)
    assert data["experiment"]["state"] == "STATE_COMPLETED"
    (trial,) = data["trials"]
    rows = data["workloads"][str(trial["id"])]
    assert [row["batches"] for row in rows] == [1, 2, 3, 4]
    assert rows[-1]["validation"]["batches"] == 4

    trials = cli("e", "list-trials", eid)
    assert re.search(rf"^{trial['id']}\s+COMPLETED", trials.out, re.MULTILINE)
    assert json.loads(cli("e", "lt", eid, "--json").out)[0]["id"] == trial["id"]

    checkpoints = cli("e", "list-checkpoints", eid, "--best", "1")
    best = finished.top_checkpoint()
    assert best is not None
    assert best.uuid in checkpoints.out
    listed = json.loads(cli("e", "lc", eid, "--json").out)
    assert best.uuid in [c["uuid"] for c in listed]

    logs = cli("e", "logs", eid)
    assert "training done" in logs.out
    assert logs.out.splitlines()[0].startswith("[")  # Determined's "[timestamp] ..." lines


def test_download_model_def(cli: Cli, finished: Experiment, tmp_path: Path) -> None:
    result = cli("e", "download-model-def", str(finished.id), "-o", str(tmp_path))
    assert result.code == 0, result.err
    archive = tmp_path / f"experiment_{finished.id}_model_def.tgz"
    assert f"Saved the model definition to {archive}" in result.out
    with tarfile.open(archive) as tgz:
        names = {name.removeprefix("./") for name in tgz.getnames()}
    assert "train.py" in names
    assert "notes.txt" not in names  # .detignore
    assert "model.ckpt" not in names  # .stalwartignore


def test_an_invalid_config_shows_its_path_and_line(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nentrypoint: python3 train.py\nsearcher:\n  name: single\n  metric: 3")
    result = cli("e", "create", str(bad), str(tmp_path))
    assert result.code == 1
    assert result.err.startswith(f"error: {bad}: 1 problem:")
    assert "<config>.searcher.metric (line 5): must be a string" in result.err
    assert "Traceback" not in result.err
    missing = cli("e", "create", str(tmp_path / "nope.yaml"))
    assert missing.code == 1
    assert "nope.yaml" in one_error_line(missing.err)
    bad_override = cli("e", "create", str(bad), "--config", "novalue")
    assert one_error_line(bad_override.err) == "error: --config 'novalue' is not KEY=VALUE"


def test_unknown_experiment_is_one_line(cli: Cli) -> None:
    for args in (("describe",), ("kill",), ("logs",), ("list-trials",), ("wait",)):
        result = cli("e", *args, "987654")
        assert result.code == 1, args
        assert one_error_line(result.err) == "error: experiment 987654 not found", args


def test_create_prints_what_the_master_noted_about_the_config(cli: Cli, admin: Client) -> None:
    """A TensorFlow model without an image pin is told which image it gets and how to pin it."""
    tensorflow = Path(__file__).parents[2] / "examples" / "tensorflow"
    result = cli("e", "create", str(tensorflow / "unpinned.yaml"), str(tensorflow), "--paused")
    assert result.code == 0, result.err
    exp_id = _created(result.out)
    admin.get_experiment(exp_id).kill()
    assert "note: the model imports TensorFlow" in result.out
    assert "framework: tensorflow" in result.out  # how to pin the choice
