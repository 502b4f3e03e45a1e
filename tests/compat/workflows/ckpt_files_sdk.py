"""Checkpoint and experiment file calls of the official 0.38.1 SDK, as ``admin`` (det venv's
Python): ``ckpt_files_sdk.py MASTER OP ARGS...`` with OP one of

- ``list EXP_ID``: the experiment's checkpoints as ``[uuid, steps_completed]``;
- ``get UUID``: a checkpoint's state and resources;
- ``remove UUID GLOB...``: ``Checkpoint.remove_files(globs)``, then the checkpoint re-read;
- ``metrics UUID``: ``Checkpoint.get_metrics()``;
- ``download UUID DIR``: ``Checkpoint.download(DIR, mode=MASTER)`` (the legacy
  ``GET /checkpoints/{uuid}``), then the files under DIR;
- ``delete-tb EXP_ID``: ``Experiment.delete_tensorboard_files()``;
- ``tasks``: the legacy ``GET /tasks`` through the SDK's session.

Prints one line ``SDK_RESULT <json>``; a failure is a traceback and a non-zero exit.
"""

import json
import pathlib
import sys
from typing import Any

from determined.common.experimental.checkpoint import DownloadMode  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def _checkpoint(uuid: str) -> dict[str, Any]:
    ckpt = client.get_checkpoint(uuid)
    return {"state": ckpt.state.name, "resources": ckpt.resources}


def main(master: str, op: str, args: list[str]) -> Any:
    client.login(master=master, user="admin", password="")
    if op == "list":
        ckpts = client.get_experiment(int(args[0])).list_checkpoints()
        return sorted(
            [[c.uuid, c.metadata["steps_completed"]] for c in ckpts], key=lambda pair: pair[1]
        )
    if op == "get":
        return _checkpoint(args[0])
    if op == "remove":
        client.get_checkpoint(args[0]).remove_files(args[1:])
        return _checkpoint(args[0])
    if op == "metrics":
        return [m.metrics for m in client.get_checkpoint(args[0]).get_metrics()]
    if op == "download":
        target = pathlib.Path(args[1])
        client.get_checkpoint(args[0]).download(str(target), mode=DownloadMode.MASTER)
        return sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    if op == "delete-tb":
        client.get_experiment(int(args[0])).delete_tensorboard_files()
        return "deleted"
    if op == "tasks":
        resp = client._determined._session.get("tasks")
        return resp.json()
    raise SystemExit(f"unknown operation {op}")


if __name__ == "__main__":
    print("SDK_RESULT " + json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3:])), flush=True)
