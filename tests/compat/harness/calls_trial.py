"""A Core API trial written for Determined, run unchanged by the official 0.38.1 harness, that
makes the harness's less common calls:

- training metrics of three types (``loss`` a number, ``done`` a boolean, ``phase`` a string)
  at every step, validation metrics and a checkpoint at the last (``steps`` hyperparameter);
- what the DeepSpeed launcher does on a non-chief container: log in as the task
  (``authentication.login_from_task``) and ``POST .../resources/{DET_RESOURCES_ID}/daemon``,
  then the same for a resources id that is not its own (prints ``DAEMON own=ok other=<status>``);
  the trial then goes on training, so it completes only if the mark did not end it;
- when it starts from a checkpoint (``info.latest_checkpoint``: a warm start), restores it,
  reads it through the SDK's ``Checkpoint.reload()`` and reports it with
  ``core_context.experimental.report_task_using_checkpoint`` (prints ``WARM uuid=... step=...
  steps_completed=...``).
"""

import json
import os
import sys

import determined as det  # type: ignore[import-not-found]  # the det venv has it
from determined import core
from determined.common.api import authentication, certs, errors  # type: ignore[import-not-found]
from determined.experimental import checkpoint as checkpoints  # type: ignore[import-not-found]


def mark_daemon(info: det.ClusterInfo) -> str:
    cert = certs.default_load(info.master_url)
    sess = authentication.login_from_task(info.master_url, cert=cert)
    own = os.environ["DET_RESOURCES_ID"]
    sess.post(f"/api/v1/allocations/{info.allocation_id}/resources/{own}/daemon")
    try:
        sess.post(f"/api/v1/allocations/{info.allocation_id}/resources/not-{own}/daemon")
        other = "ok"
    except errors.APIException as exc:
        other = str(exc.status_code)
    return f"DAEMON own=ok other={other}"


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None
    steps = int(info.trial.hparams["steps"])
    with core.init() as ctx:
        if info.latest_checkpoint is not None:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                step = json.loads((path / "state.json").read_text())["step"]
            cert = certs.default_load(info.master_url)
            sess = authentication.login_from_task(info.master_url, cert=cert)
            used = checkpoints.Checkpoint(sess, info.latest_checkpoint)
            used.reload()
            ctx.experimental.report_task_using_checkpoint(used)
            print(
                f"WARM uuid={used.uuid} step={step} "
                f"steps_completed={os.environ['DET_STEPS_COMPLETED']}",
                flush=True,
            )
        print(mark_daemon(info), flush=True)
        for step in range(1, steps + 1):
            metrics = {"loss": 1.0 / step, "done": step == steps, "phase": f"step-{step}"}
            ctx.train.report_training_metrics(steps_completed=step, metrics=metrics)
        ctx.train.report_validation_metrics(steps_completed=steps, metrics={"loss": 0.5})
        with ctx.checkpoint.store_path({"steps_completed": steps}) as (path, _):
            (path / "state.json").write_text(json.dumps({"step": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
