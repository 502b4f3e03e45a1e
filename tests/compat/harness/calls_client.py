"""The official 0.38.1 client's code paths for a trial, outside any task.

Run with the det venv's Python: ``python calls_client.py MASTER_URL TRIAL_ID``. As ``admin`` it

- ships two lines to the trial's task with the harness's legacy log sender
  (``core._log_shipper._LogSender``: ``POST /task-logs``);
- tries to set the trial RUNNING as an unmanaged trial's heartbeat does
  (``core._heartbeat._UnmanagedTrialHeartbeat``: ``PATCH /api/v1/trials/{id}``);
- reads the trial through the SDK (``client.get_trial(...).summary_metrics``) and the bindings
  (``get_GetTrial``), and the agents (``get_GetAgents``);

and prints one line ``CALLS_RESULT <json>``. Any other failure is a traceback and a non-zero exit.

``python calls_client.py MASTER_URL sources CHECKPOINT_UUID MODEL_NAME`` instead prints what the
SDK's ``Checkpoint.get_metrics()`` and ``ModelVersion.get_metrics()`` (version 1) answer: the
metrics of the trials that reported using them.
"""

import datetime
import json
import sys
from typing import Any

from determined.common.api import authentication, bindings, errors  # type: ignore[import-not-found]
from determined.core._heartbeat import _UnmanagedTrialHeartbeat  # type: ignore[import-not-found]
from determined.core._log_shipper import _LogSender  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def main(master: str, trial_id: int) -> dict[str, Any]:
    sess = authentication.login(master, "admin", "")
    result: dict[str, Any] = {}
    task_id = bindings.get_GetTrial(sess, trialId=trial_id).trial.taskId
    stamp = datetime.datetime.now(datetime.UTC).isoformat()
    sender = _LogSender(session=sess, logs_metadata={"task_id": task_id, "timestamp": stamp})
    sender.start()
    sender.write("LEGACY line one\nLEGACY line ")
    sender.write("two\n")
    sender.close()
    result["shipped"] = not sender.is_alive()

    heartbeat = _UnmanagedTrialHeartbeat(session=sess, trial_id=trial_id)
    try:
        heartbeat._update_state(bindings.trialv1State.RUNNING)
        result["patch"] = {"status": 200}
    except (bindings.APIHttpError, errors.APIException) as exc:
        status = getattr(exc, "status_code", None) or exc.response.status_code
        body = exc.response.json() if hasattr(exc, "response") else {}
        result["patch"] = {"status": status, "message": body.get("message", str(exc))}

    client.login(master=master, user="admin", password="")
    result["summary_metrics"] = client.get_trial(trial_id).summary_metrics
    trial = bindings.get_GetTrial(sess, trialId=trial_id).trial
    result["warm_start"] = trial.warmStartCheckpointUuid
    result["agent_versions"] = [a.version for a in bindings.get_GetAgents(sess).agents or []]
    return result


def sources(master: str, uuid: str, model_name: str) -> dict[str, Any]:
    client.login(master=master, user="admin", password="")

    def seen(found: Any) -> list[list[Any]]:
        return [[m.trial_id, m.group, m.steps_completed, m.metrics] for m in found]

    checkpoint = client.get_checkpoint(uuid)
    version = client.get_model(model_name).get_version(1)
    return {
        # a group is named: with none, 0.38.1's TrialMetrics reads every report's
        # "avg_metrics", which validation reports do not have (on Determined as well)
        "checkpoint": seen(checkpoint.get_metrics("training")),
        "checkpoint_validation": seen(checkpoint.get_metrics("validation")),
        "model_version": seen(version.iter_metrics("training")),
    }


if __name__ == "__main__":
    if sys.argv[2] == "sources":
        found = sources(sys.argv[1], sys.argv[3], sys.argv[4])
    else:
        found = main(sys.argv[1], int(sys.argv[2]))
    print("CALLS_RESULT " + json.dumps(found), flush=True)
