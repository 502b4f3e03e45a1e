"""``determined.experimental.client`` (the official 0.38.1 SDK) against a Stalwart master.

Run with the det venv's Python: ``python sdk_workflow.py MASTER_URL MODEL_DIR OUT_DIR``. It logs
in as ``admin``, runs a short experiment to completion and a long one through pause, activate and
kill, reads trials, logs and checkpoints, downloads the best checkpoint, and prints one line
``SDK_RESULT <json>`` with what it saw (the test asserts on it). Any failure is a traceback and a
non-zero exit.
"""

import json
import pathlib
import sys
import warnings
from typing import Any

from determined.experimental import client  # type: ignore[import-not-found]

POLL = 0.2


def config(name: str, steps: int, sleep: float) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "python3 trial.py",
        "hyperparameters": {"steps": steps, "sleep": sleep},
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
        "max_restarts": 0,
    }


def main(master: str, model_dir: str, out_dir: pathlib.Path) -> dict[str, Any]:
    client.login(master=master, user="admin", password="")
    result: dict[str, Any] = {"whoami": client.whoami().username}

    # A short experiment, run to completion.
    created = client.create_experiment(config("sdk-short", 4, 0.0), model_dir)
    exp = client.get_experiment(created.id)
    result["wait"] = str(exp.wait(interval=POLL))
    trials = exp.list_trials()
    result["trials"] = [(t.id, str(t.state)) for t in trials]
    trial = client.get_trial(trials[0].id)
    result["logs"] = [line.rstrip("\n") for line in trial.iter_logs()]
    result["head"] = [line.rstrip("\n") for line in trial.iter_logs(head=1)]
    result["tail"] = [line.rstrip("\n") for line in trial.iter_logs(tail=1)]
    result["training_steps"] = [m.steps_completed for m in trial.iter_metrics("training")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # top_checkpoint is deprecated in 0.38
        best = exp.top_checkpoint()
        best_of_trial = trial.top_checkpoint()
    listed = exp.list_checkpoints(max_results=1)
    result["best"] = {
        "uuid": best.uuid,
        "trial_best": best_of_trial.uuid,
        "listed_best": listed[0].uuid,
        "metadata": best.metadata,
        "state": str(best.state),
    }
    path = pathlib.Path(client.get_checkpoint(best.uuid).download(str(out_dir / "best")))
    result["downloaded"] = sorted(p.name for p in path.iterdir())
    result["state_json"] = json.loads((path / "state.json").read_text())

    # A long experiment: pause, activate, kill.
    long = client.create_experiment(config("sdk-long", 10_000, 0.05), model_dir)
    long_trial = long.await_first_trial(interval=POLL)
    for line in long_trial.iter_logs(follow=True):  # the stream stays open while it runs
        if "STEP 2" in line:
            result["followed"] = line.rstrip("\n")
            break
    long.pause()
    long.reload()
    result["paused"] = str(long.state)
    try:
        long.wait(interval=POLL)
    except ValueError as exc:  # wait() refuses a paused experiment
        result["wait_paused"] = str(exc)
    long.activate()
    long.reload()
    result["activated"] = str(long.state)
    long.kill()
    result["killed"] = str(long.wait(interval=POLL))
    return result


if __name__ == "__main__":
    url, model, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    print("SDK_RESULT " + json.dumps(main(url, model, out)), flush=True)
