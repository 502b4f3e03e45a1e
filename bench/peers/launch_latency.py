"""B5 on Ray Tune: from ``Tuner.fit()`` to the trial's first line, and to its first result.

Runs in the peers' virtual environment (``.cache/bench-peers``); ``bench/b5.py`` starts it as

    .cache/bench-peers/bin/python bench/peers/launch_latency.py --runs N --out RESULT.json

``ray.init(num_cpus=4)`` once (timed apart, as starting Stalwart's master and agent is), then N
times one after another: a ``Tuner`` of one trial whose function trainable stamps
``time.time()`` on its first line and calls ``tune.report`` once; a ``tune.Callback`` stamps
the driver's receipt of that first result. Ray's defaults otherwise (a new actor per trial).
RESULT.json: ``{"version", "init_s", "first_line_s": [...], "first_result_s": [...]}``,
seconds from calling ``fit()``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import ray  # type: ignore[import-not-found]
    from ray import tune

    started = time.monotonic()
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        _temp_dir=tempfile.mkdtemp(prefix="b5ray-"),
    )
    init_s = time.monotonic() - started
    stamps = Path(tempfile.mkdtemp(prefix="b5stamps-"))

    def trainable(config: dict[str, Any]) -> None:
        first = time.time()
        (Path(config["stamps"]) / "first_line").write_text(repr(first))
        tune.report({"loss": 1.0})

    class FirstResult(tune.Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.at: float | None = None

        def on_trial_result(self, *args: Any, **kwargs: Any) -> None:
            if self.at is None:
                self.at = time.time()

    first_line, first_result = [], []
    for i in range(args.runs):
        callback = FirstResult()
        tuner = tune.Tuner(
            trainable,
            param_space={"stamps": str(stamps)},
            tune_config=tune.TuneConfig(num_samples=1),
            run_config=tune.RunConfig(
                name=f"b5-{i}",
                storage_path=str(stamps / "results"),
                callbacks=[callback],
                verbose=0,
            ),
        )
        t0 = time.time()
        tuner.fit()
        first_line.append(float((stamps / "first_line").read_text()) - t0)
        if callback.at is not None:
            first_result.append(callback.at - t0)
    ray.shutdown()
    payload = {
        "version": ray.__version__,
        "init_s": init_s,
        "first_line_s": first_line,
        "first_result_s": first_result,
    }
    args.out.write_text(json.dumps(payload), encoding="utf-8")


if __name__ == "__main__":
    main()
