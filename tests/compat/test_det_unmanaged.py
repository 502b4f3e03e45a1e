"""The official SDK's detached mode (``core_v2`` unmanaged) against a real Stalwart master: a
plain Python script, no task and no agent, reports training and validation metrics, a
checkpoint and its output; the experiment and trial show on the master (SDK and ``det``); the
same script run again with the same external ids resumes the same trial from its checkpoint.
Managed experiments refuse trials from outside.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.compat.conftest import Det, MasterProcess, describe, logged_in_admin, sdk_result

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).resolve().parent / "workflows"


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


def test_a_detached_script_reports_and_resumes_by_external_id(
    det_venv: Path, admin: Det, tmp_path: Path
) -> None:
    storage = str(tmp_path / "checkpoints")
    first = sdk_result(det_venv, admin, WORKFLOWS / "unmanaged_sdk.py", storage, "nightly-1")
    assert first["run"] == 1
    assert first["resumed_from"] is None
    assert first["state"] == "STATE_COMPLETED"
    assert first["trial_state"] == "STATE_COMPLETED"
    assert first["labels"] == ["offline"]
    assert first["trial_hparams"] == {"lr": 0.1}
    assert first["training"] == [[10, 1.0], [20, 0.5], [30, 1 / 3]]
    assert first["validation"] == [[30, 0.25]]
    assert first["checkpoints"] == [first["checkpoint"]]
    assert (tmp_path / "checkpoints" / str(first["checkpoint"]) / "model.txt").is_file()

    second = sdk_result(det_venv, admin, WORKFLOWS / "unmanaged_sdk.py", storage, "nightly-1")
    assert (second["experiment"], second["trial"]) == (first["experiment"], first["trial"])
    assert second["trials"] == [first["trial"]]
    assert second["by_external_id"] == first["trial"]
    assert second["run"] == 2
    assert second["resumed_from"] == first["checkpoint"]
    assert [s for s, _ in second["training"]] == [10, 20, 30, 40, 50, 60]
    assert second["checkpoints"] == [first["checkpoint"], second["checkpoint"]]
    assert second["state"] == "STATE_COMPLETED"

    # the official CLI sees the experiment, the trial and the script's output
    listed = admin.ok("experiment", "list").stdout
    assert "detached" in listed
    logs = admin.ok("trial", "logs", str(first["trial"])).stdout
    assert logs.count("training done") == 2

    other = sdk_result(det_venv, admin, WORKFLOWS / "unmanaged_sdk.py", storage, "nightly-2")
    assert other["experiment"] != first["experiment"]
    assert other["run"] == 1


REFUSE = """
import sys
from determined.common.api import bindings, errors
from determined.experimental import client
d = client.Determined(master=sys.argv[1], user="admin", password="")
exp = bindings.post_CreateExperiment(d._session, body=bindings.v1CreateExperimentRequest(
    config="name: managed\\nentrypoint: python3 -c 'print(1)'\\n"
    "searcher:\\n  name: single\\n  metric: loss\\n  max_length: 1\\n")).experiment
for call in (
    lambda: bindings.post_CreateTrial(d._session, body=bindings.v1CreateTrialRequest(
        experimentId=exp.id, unmanaged=True)),
    lambda: bindings.post_ActivateExperiment(d._session, id=int(sys.argv[2])),
):
    try:
        call()
        print("ACCEPTED")
    except errors.APIException as e:
        print("REFUSED", e)
"""


def test_trials_from_outside_only_for_unmanaged_experiments(
    det_venv: Path, admin: Det, tmp_path: Path
) -> None:
    storage = str(tmp_path / "checkpoints")
    run = sdk_result(det_venv, admin, WORKFLOWS / "unmanaged_sdk.py", storage, "refusals")
    script = tmp_path / "refuse.py"
    script.write_text(REFUSE)
    done = subprocess.run(
        [str(det_venv / "bin" / "python"), str(script), admin.master.url, str(run["experiment"])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(admin.env),
    )
    assert done.returncode == 0, describe(done)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("REFUSED"), done.stdout
    assert "only unmanaged experiments" in lines[0]
    assert lines[1].startswith("REFUSED"), done.stdout
    assert "is unmanaged" in lines[1]
