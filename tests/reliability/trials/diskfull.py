"""A Core API trial for the disk-full test: one small checkpoint that fits, then one that does not.

Hyperparameters: ``big_bytes`` (the size of the second checkpoint's file) and ``fsize_limit``
(when not 0, the run limits the size of any file it writes with ``RLIMIT_FSIZE``: the fallback
where the test cannot mount a small file system, so writes fail with ``EFBIG`` instead of
``ENOSPC``). The storage error of the second checkpoint is not caught: the run fails with it.
"""

import os
import resource
import signal
import sys
from pathlib import Path

import stalwart as det


def write_big(path: Path, size: int) -> None:
    with open(path, "wb") as out:
        for _ in range(size // 65536):
            out.write(os.urandom(65536))
        out.flush()
        os.fsync(out.fileno())


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    assert info.trial is not None
    hp = info.trial.hparams
    limit = int(hp.get("fsize_limit", 0))
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    with det.core.init() as ctx:
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, _uuid):
            (path / "small.bin").write_bytes(b"s" * 4096)
        print("checkpointed step 1", flush=True)
        ctx.train.report_training_metrics(steps_completed=2, metrics={"loss": 0.5})
        with ctx.checkpoint.store_path({"steps_completed": 2}) as (path, _uuid):
            write_big(path / "big.bin", int(hp["big_bytes"]))
        print("checkpointed step 2", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
