"""A model definition carries only what is under its context directory.

Master side (a real master process, real HTTP): an upload with a path that leaves the context
(``..``, absolute, backslashes, NUL) or with a link entry is refused 400 with a message naming
the entry, and no experiment is stored. Client side (:func:`pack_context`, what ``stalwart e
create`` and the Python client send): a symbolic link in the context that resolves outside it is
refused before anything is sent, naming the link and what to do; links inside are packed as
what they point to, and an ignore file can leave an outside link out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.client import Client
from stalwart.client.context import pack_context
from stalwart.errors import InvalidArgumentError
from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.model_def import entry
from tests.reliability.conftest import MASTER_CONFIG, experiment_config, make_cluster

CONFIG = experiment_config(
    "  name: single\n  metric: loss\n  max_length:\n    batches: 10", "  lr: 0.1"
)


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Api]]:
    tmp: Path = tmp_path_factory.mktemp("model-def")
    cluster = make_cluster(tmp, MASTER_CONFIG)
    cluster.start_master()
    api = Api(cluster.url)
    try:
        yield cluster, api
    finally:
        api.close()
        cluster.stop()


def _experiments(api: Api) -> int:
    return len(api.get("/api/v1/experiments", limit=1000)["experiments"])


@pytest.mark.parametrize(
    ("path", "kind", "words"),
    [
        ("../evil.py", 48, "outside the context"),
        ("pkg/../../evil.py", 48, "outside the context"),
        ("..", 53, "outside the context"),
        ("/etc/cron.d/evil", 48, "absolute path"),
        ("pkg\\..\\..\\evil.py", 48, "invalid file path"),
        ("evil\x00.py", 48, "invalid file path"),
        ("link", 50, "links are not allowed"),  # tar SYMTYPE
        ("hard", 49, "links are not allowed"),  # tar LNKTYPE
    ],
)
def test_an_upload_leaving_the_context_is_refused_400_and_nothing_is_stored(
    master: tuple[LocalCluster, Api], path: str, kind: int, words: str
) -> None:
    _, api = master
    before = _experiments(api)
    files = [entry("train.py"), entry(path, b"/etc/passwd", kind)]
    response = api.http.post(
        "/api/v1/experiments",
        json={"config": CONFIG, "modelDefinition": files, "activate": False},
    )
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert words in response.json()["message"], response.json()
    assert _experiments(api) == before


def test_a_link_in_the_context_pointing_outside_is_refused_before_upload(
    master: tuple[LocalCluster, Api], tmp_path: Path
) -> None:
    cluster, api = master
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours\n")
    (tmp_path / "outside").mkdir()
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text("print('hi')\n")
    (context / "creds.txt").symlink_to(secret)
    before = _experiments(api)
    with pytest.raises(
        InvalidArgumentError, match=r"creds\.txt is a link to .*secret\.txt"
    ) as info:
        pack_context(context)
    assert info.value.hint is not None
    assert ".stalwartignore" in info.value.hint

    with (
        Client(cluster.url, "admin", "", config_dir=tmp_path / "auth", environ={}) as client,
        pytest.raises(InvalidArgumentError, match="outside the context directory"),
    ):
        client.create_experiment(CONFIG, context)
    assert _experiments(api) == before

    (context / "creds.txt").unlink()
    (context / "data").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(InvalidArgumentError, match="data is a link"):
        pack_context(context)


def test_links_inside_the_context_and_ignored_links_are_fine(tmp_path: Path) -> None:
    context = tmp_path / "context"
    (context / "pkg").mkdir(parents=True)
    (context / "pkg" / "model.py").write_text("x = 1\n")
    (context / "model.py").symlink_to(context / "pkg" / "model.py")
    (context / "outside.txt").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "elsewhere.txt").write_text("data\n")
    (context / ".stalwartignore").write_text("outside.txt\n")
    packed = {entry.path: entry.content for entry in pack_context(context)}
    assert packed["model.py"] == b"x = 1\n"
    assert "outside.txt" not in packed
