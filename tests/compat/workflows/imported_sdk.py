"""An imported Determined history, read through ``determined.experimental.client`` (the
official 0.38.1 SDK).

Run with the det venv's Python: ``python imported_sdk.py MASTER_URL USER PASSWORD
EXPERIMENT_ID``. Logs in with the user's old Determined password and prints one line
``SDK_RESULT <json>``: for each trial of the experiment, its metrics by group (steps and the
searcher metric) and its best checkpoint's uuid, and the experiment's best checkpoint.
"""

import json
import sys
from typing import Any

from determined.experimental import client  # type: ignore[import-not-found]


def main(master: str, user: str, password: str, experiment_id: int) -> dict[str, Any]:
    client.login(master=master, user=user, password=password)
    experiment = client.get_experiment(experiment_id)
    trials: dict[str, Any] = {}
    for trial in experiment.list_trials():
        metrics: dict[str, list[Any]] = {}
        for group in ("training", "validation", "inference"):
            metrics[group] = [[m.steps_completed, m.metrics] for m in trial.iter_metrics(group)]
        top = trial.top_checkpoint()
        trials[str(trial.id)] = {"metrics": metrics, "best": top.uuid}
    return {"trials": trials, "best": experiment.top_checkpoint().uuid}


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
    print("SDK_RESULT " + json.dumps(result))
