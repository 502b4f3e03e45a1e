"""The model registry through ``determined.experimental.client`` (the official 0.38.1 SDK).

Run with the det venv's Python: ``python registry_sdk.py MASTER_URL CHECKPOINT_UUID WORKSPACE
OUT_DIR``. As ``admin`` it creates a model, edits it, registers the checkpoint, reads the version
back and downloads its checkpoint through ``version.checkpoint``, archives, moves and deletes,
and prints one line ``SDK_RESULT <json>`` with what it saw. Any failure is a traceback and a
non-zero exit.
"""

import json
import pathlib
import sys
import warnings
from typing import Any

from determined.common.api import errors  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def main(master: str, uuid: str, workspace: str, out_dir: pathlib.Path) -> dict[str, Any]:
    client.login(master=master, user="admin", password="")
    result: dict[str, Any] = {}
    model = client.create_model("sdk-model", description="first", metadata={"a": 1})
    result["created"] = {"id": model.model_id, "workspace": model.workspace_id}
    by_name, by_id = client.get_model("sdk-model"), client.get_model(model.model_id)
    result["same"] = by_name.model_id == by_id.model_id == model.model_id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # get_models is deprecated in 0.38
        result["listed"] = [m.name for m in client.get_models(name="sdk")]
    model.add_metadata({"b": 2})
    model.remove_metadata(["a"])
    model.set_labels(["y", "z"])
    model.set_description("second")
    model.reload()
    result["edited"] = [model.metadata, model.labels, model.description]
    result["labels"] = client.get_model_labels()

    version = model.register_version(uuid)
    version.set_name("best")
    version.set_notes("how it was trained")
    latest = model.get_version()
    assert latest is not None
    result["version"] = {
        "number": latest.model_version,
        "name": latest.name,
        "notes": latest.notes,
        "uuid": latest.checkpoint.uuid if latest.checkpoint else None,
        "model_id": latest.model_id,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # get_versions is deprecated in 0.38
        result["versions"] = [v.model_version for v in model.get_versions()]
    assert latest.checkpoint is not None
    path = pathlib.Path(latest.checkpoint.download(str(out_dir / "download")))
    result["downloaded"] = json.loads((path / "state.json").read_text())

    model.archive()
    try:
        model.set_labels(["refused"])
        result["archived_edit"] = "allowed"
    except errors.APIException as exc:
        result["archived_edit"] = str(exc)
    model.unarchive()
    model.move_to_workspace(workspace)
    model.reload()
    result["moved_to"] = model.workspace_id

    second = model.register_version(uuid)
    second.delete()
    result["after_delete"] = [v.model_version for v in model.list_versions()]
    model.delete()
    try:
        client.get_model("sdk-model")
        result["deleted"] = False
    except errors.NotFoundException:
        result["deleted"] = True
    return result


if __name__ == "__main__":
    found = main(sys.argv[1], sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4]))
    print("SDK_RESULT " + json.dumps(found), flush=True)
