"""Experiment labels through the official SDK, unmodified, and an experiment without files.

Run with the det-venv python: ``labels_sdk.py MASTER_URL CONFIG_PATH``. Logs in as ``admin``,
creates an experiment (killed at once) from ``CONFIG_PATH`` with no model directory (the SDK then
sends ``modelDefinition: null``), adds labels from eight threads at once, adds one twice,
removes one, and prints one line ``SDK_RESULT <json>``.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

from determined.experimental import client  # type: ignore[import-not-found]


def main() -> None:
    master, config_path = sys.argv[1], sys.argv[2]
    client.login(master=master, user="admin", password="")
    experiment = client.create_experiment(config_path, model_dir=None)
    result: dict[str, object] = {"created": experiment.id}
    experiment.kill()

    def add(i: int) -> None:
        # each thread its own Experiment object, as separate scripts would have
        client.get_experiment(experiment.id).add_label(f"t{i}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(add, range(8)))
    experiment.add_label("t3")  # already there: no-op
    result["after_add"] = sorted(experiment.labels)
    experiment.remove_label("t0")
    experiment.remove_label("absent")  # not there: no-op
    result["after_remove"] = sorted(experiment.labels)
    result["stored"] = sorted(client.get_experiment(experiment.id).labels)
    result["config_labels"] = sorted(client.get_experiment(experiment.id).config["labels"])
    print("SDK_RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
