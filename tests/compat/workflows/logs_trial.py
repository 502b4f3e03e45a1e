"""A trial whose output has ranks, levels and both streams, for the ``det trial logs`` /
``det task logs`` filter tests. Prints ``MARK`` lines (and no metrics besides one report)."""

import sys

import stalwart as det


def main() -> None:
    with det.core.init() as ctx:
        print("[rank=0] INFO: MARK alpha", flush=True)
        print("[rank=1] WARNING: MARK beta", flush=True)
        print("ERROR: MARK gamma", file=sys.stderr, flush=True)
        print("MARK delta", flush=True)
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})


if __name__ == "__main__":
    main()
