"""core.init(): a Determined Core API script runs unchanged but for its import line, in a task and
off-cluster; InvalidHP; the multi-slot rule; import hygiene."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import stalwart as det
from stalwart.core import LocalTrainContext, TaskEnv
from stalwart.core._context import build_context
from stalwart.core._storage import DirectoryStorage, storage_from_config, storage_from_master
from stalwart.core.env import current
from stalwart.errors import UnauthenticatedError
from stalwart.master.db.tables import Checkpoint, StorageBackend, Trial
from stalwart.master.services.trials import add_storage_backend
from tests.core.conftest import FAST_RETRY, MasterServer, new_trial_environ, read_metrics
from tests.master.conftest import make_settings

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """\
    import logging
    import sys

    import stalwart as det

    logging.basicConfig(level=logging.WARNING, format=det.LOG_FORMAT)

    with det.core.init(tensorboard_mode=det.core.TensorboardMode.MANUAL) as core_context:
        info = det.get_cluster_info()
        start = 0
        if info is not None and info.latest_checkpoint:
            with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = int((path / "step").read_text())
        for step in range(start + 1, 6):
            core_context.train.report_training_metrics(step, {"loss": 1.0 / step})
            if core_context.preempt.should_preempt():
                sys.exit(0)
        core_context.train.report_validation_metrics(5, {"loss": 0.2})
        with core_context.checkpoint.store_path({"steps_completed": 5}) as (path, uuid):
            (path / "step").write_text("5")
        print("saved", uuid)

    # what a trial's start does not pay for: the master's stack, the frameworks, the config
    # models (the master validated the config) and httpx's command-line tool (rich)
    heavy = [m for m in sys.modules if m.split(".")[0] in
             ("fastapi", "sqlalchemy", "uvicorn", "starlette", "torch", "tensorflow",
              "pydantic", "rich")
             or m.startswith(("stalwart.master", "stalwart.config", "httpx._main"))]
    print("heavy modules:", heavy)
    """
)


def run_script(tmp_path: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.update(environ)
    env["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def no_task(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("DET_"):
            monkeypatch.delenv(name)
    current.cache_clear()
    yield
    current.cache_clear()


def test_a_core_api_script_in_a_task(master: MasterServer, tmp_path: Path) -> None:
    environ = new_trial_environ(master)
    done = run_script(tmp_path, environ)
    assert done.returncode == 0, done.stderr
    assert "heavy modules: []" in done.stdout
    env = TaskEnv.from_environ(environ)
    assert env is not None
    assert [r["totalBatches"] for r in read_metrics(master, env, "training")] == [1, 2, 3, 4, 5]
    assert [r["totalBatches"] for r in read_metrics(master, env, "validation")] == [5]
    uuid = done.stdout.split("saved ", 1)[1].split()[0]
    with master.state.sessions() as session:
        trial = session.get(Trial, int(environ["DET_TRIAL_ID"]))
        assert trial is not None
        assert trial.latest_checkpoint == uuid


def test_the_same_script_off_cluster(tmp_path: Path) -> None:
    done = run_script(tmp_path, {})
    assert done.returncode == 0, done.stderr
    assert '[training] steps_completed=1 {"loss": 1.0}' in done.stdout
    assert "heavy modules: []" in done.stdout
    uuid = done.stdout.split("saved ", 1)[1].split()[0]
    assert (tmp_path / "checkpoints" / uuid / "step").read_text() == "5"
    assert (tmp_path / "checkpoints" / uuid / "metadata.json").exists()


def test_local_init(no_task: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with det.core.init() as ctx:
        assert ctx.info is None
        assert det.get_cluster_info() is None
        assert isinstance(ctx.train, LocalTrainContext)
        ctx.train.report_training_metrics(1, {"loss": 0.5})
        assert ctx.train.reports[0].metrics == {"loss": 0.5}
        assert ctx.preempt.should_preempt() is False
        assert ctx.distributed.size == 1
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, _uuid):
            assert path.parent == tmp_path / "checkpoints"
    elsewhere = det.core.init(checkpoint_storage=str(tmp_path / "elsewhere"))
    with elsewhere, elsewhere.checkpoint.store_path({"steps_completed": 1}) as (path, _uuid):
        assert path.parent == tmp_path / "elsewhere"


def test_init_reads_the_task_environment(
    master: MasterServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = new_trial_environ(master)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    current.cache_clear()
    try:
        info = det.get_cluster_info()
        assert info is not None
        assert info.allocation_id == environ["DET_ALLOCATION_ID"]
        assert info.trial.trial_id == int(environ["DET_TRIAL_ID"])
        assert info.trial.hparams == {"lr": 0.1}
        assert info.slot_ids == [0]
        assert info.container_rank == 0
        with det.core.init() as ctx:
            assert ctx.info is not None
            assert ctx.info.task_id == environ["DET_TASK_ID"]
    finally:
        current.cache_clear()


def test_invalid_hp_is_an_early_exit(master: MasterServer) -> None:
    environ = new_trial_environ(master)
    env = TaskEnv.from_environ(environ)
    assert env is not None
    assert env.trial is not None
    with pytest.raises(SystemExit) as exited, build_context(env, retry=FAST_RETRY):
        raise det.InvalidHP("lr too big")
    assert exited.value.code == 0
    with master.state.sessions() as session:
        trial = session.get(Trial, env.trial.trial_id)
        assert trial is not None
        assert trial.early_exit_reason is not None


def test_multi_slot_tasks_need_a_distributed_context(master: MasterServer) -> None:
    environ = new_trial_environ(master) | {"DET_SLOT_IDS": "[0, 1]"}
    env = TaskEnv.from_environ(environ)
    with pytest.raises(ValueError, match="valid DistributedContext"):
        build_context(env)


def test_non_trial_tasks_get_local_contexts(master: MasterServer, tmp_path: Path) -> None:
    environ = new_trial_environ(master) | {"DET_TASK_TYPE": "COMMAND"}
    env = TaskEnv.from_environ(environ)
    with build_context(env, checkpoint_storage=str(tmp_path)) as ctx:
        assert ctx.info is not None
        assert isinstance(ctx.train, LocalTrainContext)
        with pytest.raises(RuntimeError, match="task_type is COMMAND"):
            _ = ctx.info.trial


def test_import_stalwart_is_cheap() -> None:
    code = (
        "import sys, stalwart\n"
        "prefixes = ('stalwart.', 'httpx', 'pydantic')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(prefixes))\n"
        "assert not loaded, loaded\n"
        "assert stalwart.LOG_FORMAT.startswith('%(levelname)s')\n"
        "assert 'core' in dir(stalwart)\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = getattr(det, "nope")  # noqa: B009 (the module __getattr__ is under test)


@pytest.mark.parametrize(
    "config",
    [
        {"type": "shared_fs", "host_path": "/mnt/ckpt", "storage_path": "team/runs"},
        {"type": "shared_fs", "host_path": "/mnt/ckpt", "storage_path": "/mnt/ckpt/abs"},
        {"type": "shared_fs", "host_path": "/mnt/ckpt", "save_trial_best": 2},
        {"type": "directory", "container_path": "/data/ckpt"},
    ],
)
def test_the_master_s_storage_opens_where_the_validated_config_says(
    config: dict[str, object],
) -> None:
    """A trial opens the config the master sent without validating it again; it lands in the
    same directory as the validated path does."""
    fast = storage_from_master(config)
    checked = storage_from_config(config)
    assert isinstance(fast, DirectoryStorage)
    assert isinstance(checked, DirectoryStorage)
    assert fast.base == checked.base


def test_a_trial_s_start_imports_only_what_it_uses() -> None:
    """The harness and the experiment's storage, opened, without fsspec (until a checkpoint
    moves), pydantic and the config models (the master validated the config) or httpx's
    command-line tool: each was a tenth of a CPU second or more of every trial's start."""
    code = (
        "import sys\n"
        "import stalwart.core\n"
        "from stalwart.core._storage import storage_from_master\n"
        "storage = storage_from_master({'type': 'shared_fs', 'host_path': '/tmp/ckpt'})\n"
        "assert storage.root == '/tmp/ckpt', storage.root\n"
        "heavy = ('fsspec', 'pydantic', 'rich', 'stalwart.config', 'httpx._main')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports Stalwart from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_init_does_not_wait_for_the_master_to_register_the_run(tmp_path: Path) -> None:
    """``core.init()`` returns while ``runs/start`` is still trying (the master is down); the
    registration completes once the master is back, and a checkpoint report carries its
    ``storageId``."""
    server = MasterServer(make_settings(tmp_path / "home")).start()
    try:
        env = TaskEnv.from_environ(new_trial_environ(server))
        assert env is not None
        server.stop()
        try:
            ctx = build_context(env, retry=FAST_RETRY)  # returns with nothing answered
        finally:
            server.start()  # same port, same database
        with ctx, ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "weights").write_text("1")
        with server.state.sessions() as session:
            checkpoint = session.get(Checkpoint, uuid)
            assert checkpoint is not None
            assert checkpoint.storage_id is not None
            assert session.get(StorageBackend, checkpoint.storage_id) is not None
    finally:
        server.stop()


def test_a_refused_run_registration_is_raised_as_the_context_closes(
    master: MasterServer,
) -> None:
    environ = new_trial_environ(master) | {"DET_SESSION_TOKEN": "not-the-allocation-token"}
    env = TaskEnv.from_environ(environ)
    ctx = build_context(env, retry=FAST_RETRY)
    with pytest.raises(UnauthenticatedError), ctx:
        pass


def test_a_storage_the_master_named_is_not_registered_again(tmp_path: Path) -> None:
    """With ``STALWART_STORAGE_ID`` (Stalwart's master registered the experiment config's
    storage before the task started) ``core.init()`` posts no ``runs/start``: the context opens
    and closes while the master is down, and a checkpoint report carries that id."""
    server = MasterServer(make_settings(tmp_path / "home")).start()
    try:
        environ = new_trial_environ(server)
        storage = json.loads(environ["DET_EXPERIMENT_CONFIG"])["checkpoint_storage"]
        with server.state.sessions() as session:
            storage_id = add_storage_backend(session, int(environ["DET_TRIAL_ID"]), storage)
        assert storage_id is not None
        env = TaskEnv.from_environ(environ | {"STALWART_STORAGE_ID": str(storage_id)})
        assert env is not None
        server.stop()
        try:
            build_context(env, retry=FAST_RETRY).close()  # nothing to wait for
        finally:
            server.start()
        ctx = build_context(env, retry=FAST_RETRY)
        with ctx, ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "weights").write_text("1")
        with server.state.sessions() as session:
            checkpoint = session.get(Checkpoint, uuid)
            assert checkpoint is not None
            assert checkpoint.storage_id == storage_id
    finally:
        server.stop()
