"""A Core API trial that configures logging at INFO, as Determined's examples do, for the tests
of what a user sees when debugging a run.

Hyperparameters: ``mode``: ``ok`` (reports metrics, makes one request of its own to the master
with httpx, logs a line and exits 0), ``oom`` (reports, then dies of an exception whose message
is PyTorch's CUDA out-of-memory error, exit code 1), ``exit3_once`` (the first run prints a line
and exits with code 3; a restarted run completes).
"""

import logging
import os
import sys

import httpx

import stalwart as det


def main() -> int:
    logging.basicConfig(level=logging.INFO)
    info = det.get_cluster_info()
    assert info is not None
    assert info.trial is not None
    mode = str(info.trial.hparams["mode"])
    first_run = int(os.environ["DET_TRIAL_RUN_ID"]) == 1
    with det.core.init() as ctx:
        for step in range(1, 4):
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        ctx.train.report_validation_metrics(steps_completed=3, metrics={"loss": 0.3})
        if mode == "ok":
            httpx.get(f"{info.master_url}/info", timeout=30).raise_for_status()
            logging.info("the user's own line")
            return 0
        if mode == "oom":
            print("allocating the big tensor", flush=True)
            raise RuntimeError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)"
            )
        if mode == "exit3_once" and first_run:
            print("giving up on purpose", flush=True)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
