"""Rows in a Determined 0.38.1 database, in the shapes a Determined master writes them.

Test code: :func:`create_determined_database` makes a fresh PostgreSQL database from the
captured schema (``tests/fixtures/determined_db/schema-0.38.1.sql``) and :func:`seed` fills it
as a team's cluster would be after some work:

- users ``alice`` (bcrypt cost 15, Determined 0.38's) and ``bob`` (cost 10, older releases')
  with their passwords hashed as Determined does (bcrypt of the first 72 bytes of the client's
  salted SHA-512), next to the built-in ``admin`` and ``determined``;
- workspace ``vision`` and its project ``mnist``;
- experiment ``mnist-asha`` (adaptive ASHA, COMPLETED, four trials, two stopped early), with
  training and validation metrics, a custom ``inference`` group and a checkpoint at each
  validation, on ``shared_fs`` storage under the given directory (real files);
- experiment ``mnist-single`` (single trial, still ACTIVE, its trial RUNNING and restarted once);
- experiment ``old-baseline`` (single trial, COMPLETED, archived, in Uncategorized);
- model ``mnist-cnn`` with version 1 (the ASHA experiment's best checkpoint);
- template ``gpu-defaults`` and a workspace webhook on COMPLETED experiments;
- two task-log lines per ASHA trial (one of them not UTF-8).

Rows go in through the base tables (``runs``, ``trials_v2``, ``raw_steps``, ``checkpoints_v2``,
``run_checkpoints``...), as Determined's master writes them; nothing here is Determined's code.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import psycopg
from psycopg.types.json import Jsonb

from stalwart.master.services.passwords import CLIENT_SALT

__all__ = [
    "SCHEMA",
    "LiveSearches",
    "Seeded",
    "add_live_searches",
    "add_training_metrics",
    "create_determined_database",
    "determined_hash",
    "drop_database",
    "seed",
]

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "determined_db" / "schema-0.38.1.sql"
CLUSTER_ID = "5c1c9d5e-3b8e-4a57-9d5f-1f2d3c4b5a69"
T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)


def determined_hash(password: str, rounds: int = 15) -> str:
    """``users.password_hash`` as Determined 0.38 writes it: bcrypt (Go's ``$2a$``) of the
    first 72 bytes of what the official client sends, ``sha512(salt + password)`` in hex."""
    sent = hashlib.sha512((CLIENT_SALT + password).encode()).hexdigest()
    digest = bcrypt.hashpw(sent.encode()[:72], bcrypt.gensalt(rounds=rounds)).decode()
    return "$2a$" + digest[4:]


def _admin_url(url: str, database: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{database}"


def create_determined_database(server_url: str, name: str) -> str:
    """A fresh database ``name`` on the server of ``server_url`` holding Determined 0.38.1's
    schema (the captured dump); its URL."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _admin_url(server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA.read_text(encoding="utf-8").encode())
    return url


def drop_database(server_url: str, name: str) -> None:
    """Drop database ``name`` (closing its other connections first)."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class SeededTrial:
    """A seeded trial (a Determined run) and what it reported."""

    id: int
    experiment_id: int
    task_id: str
    hparams: dict[str, Any]
    state: str
    steps: int
    checkpoints: list[str] = field(default_factory=list)
    best_checkpoint: str | None = None
    best_value: float | None = None
    training_reports: int = 0
    validation_reports: int = 0
    custom_reports: int = 0
    log_lines: list[str] = field(default_factory=list)


@dataclass
class Seeded:
    """What :func:`seed` wrote: ids, passwords and checkpoint uuids the tests look for."""

    passwords: dict[str, str]
    user_ids: dict[str, int]
    workspace_id: int
    project_id: int
    asha_id: int
    single_id: int
    archived_id: int
    trials: dict[int, SeededTrial]
    model_id: int
    model_checkpoint: str
    storage_dir: Path

    def trials_of(self, experiment_id: int) -> list[SeededTrial]:
        """The experiment's seeded trials, by id."""
        return sorted(
            (t for t in self.trials.values() if t.experiment_id == experiment_id),
            key=lambda t: t.id,
        )


def _naive(when: dt.datetime) -> dt.datetime:
    """``tasks`` and ``allocations`` hold times without a zone (UTC)."""
    return when.astimezone(dt.UTC).replace(tzinfo=None)


def _model_definition() -> bytes:
    """The experiment's model definition, as Determined keeps it: a ``.tar.gz`` of the files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in (
            ("train.py", "import determined as det\n\nprint('training')\n"),
            ("const.yaml", "name: mnist\n"),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(T0.timestamp())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _config(name: str, searcher: dict[str, Any], storage: Path, **extra: Any) -> dict[str, Any]:
    """An experiment config as Determined 0.38 stores it: every field defaulted."""
    config: dict[str, Any] = {
        "bind_mounts": [],
        "checkpoint_policy": "best",
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": str(storage),
            "container_path": "/determined_shared_fs",
            "checkpoint_path": None,
            "tensorboard_path": None,
            "storage_path": None,
            "propagation": "rprivate",
            "save_experiment_best": 0,
            "save_trial_best": 1,
            "save_trial_latest": 1,
        },
        "data": {"url": "https://example.org/mnist.tar.gz"},
        "debug": False,
        "description": "",
        "entrypoint": "python3 train.py",
        "environment": {
            "add_capabilities": [],
            "drop_capabilities": [],
            "environment_variables": {"cpu": [], "cuda": [], "rocm": []},
            "force_pull_image": False,
            "image": {
                "cpu": "determinedai/pytorch-ngc-dev:0736b6d",
                "cuda": "determinedai/pytorch-ngc-dev:0736b6d",
                "rocm": "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d",
            },
            "pod_spec": None,
            "ports": {},
            "proxy_ports": [],
            "registry_auth": None,
        },
        "hyperparameters": {
            "global_batch_size": {"type": "const", "val": 64},
            "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1, "count": None},
            "hidden": {"type": "int", "minval": 32, "maxval": 256, "count": None},
        },
        "integrations": None,
        "labels": [],
        "log_policies": [
            {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*", "action": None},
            {"name": "ECC Error", "pattern": ".*uncorrectable ECC error.*", "action": None},
        ],
        "max_restarts": 5,
        "min_checkpoint_period": {"batches": 0},
        "min_validation_period": {"batches": 0},
        "name": name,
        "optimizations": {
            "aggregation_frequency": 1,
            "auto_tune_tensor_fusion": False,
            "average_aggregated_gradients": True,
            "average_training_metrics": True,
            "grad_updates_size_file": None,
            "gradient_compression": False,
            "mixed_precision": "O0",
            "tensor_fusion_cycle_time": 1,
            "tensor_fusion_threshold": 64,
        },
        "pbs": {},
        "perform_initial_validation": False,
        "preemption_timeout": 3600,
        "profiling": {
            "begin_on_batch": 0,
            "enabled": False,
            "end_after_batch": None,
            "sync_timings": True,
        },
        "project": "",
        "records_per_epoch": 0,
        "reproducibility": {"experiment_seed": 1740819600},
        "resources": {
            "devices": [],
            "is_single_node": None,
            "max_slots": None,
            "native_parallel": False,
            "priority": None,
            "resource_pool": "default",
            "shm_size": None,
            "slots_per_trial": 1,
            "weight": 1,
        },
        "scheduling_unit": 100,
        "searcher": {
            "metric": "validation_loss",
            "smaller_is_better": True,
            "source_checkpoint_uuid": None,
            "source_trial_id": None,
            **searcher,
        },
        "slurm": {},
        "workspace": "",
    }
    config.update(extra)
    return config


class _Writer:
    """Inserts rows as Determined's master does, on one connection."""

    def __init__(self, conn: psycopg.Connection[Any], storage: Path) -> None:
        self.conn = conn
        self.storage = storage
        self.storage_id = self._storage_backend()

    def one(self, sql: str, *params: Any) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        assert row is not None
        return row[0]

    def _storage_backend(self) -> int:
        """The ``storage_backend`` of the ``shared_fs`` storage (one per distinct config, as
        Determined keeps them)."""
        found = self.conn.execute(
            "SELECT b.id FROM storage_backend b JOIN storage_backend_shared_fs f "
            "ON f.id = b.shared_fs_id WHERE f.host_path = %s",
            (str(self.storage),),
        ).fetchone()
        if found is not None:
            return int(found[0])
        fs = self.one(
            "INSERT INTO storage_backend_shared_fs (host_path, container_path, propagation) "
            "VALUES (%s, '/determined_shared_fs', 'rprivate') RETURNING id",
            str(self.storage),
        )
        return int(
            self.one("INSERT INTO storage_backend (shared_fs_id) VALUES (%s) RETURNING id", fs)
        )

    def user(self, name: str, password: str | None, rounds: int, admin: bool = False) -> int:
        hashed = determined_hash(password, rounds) if password else None
        user_id = int(
            self.one(
                "INSERT INTO users (username, password_hash, admin, active, display_name, "
                "modified_at) VALUES (%s, %s, %s, true, %s, %s) RETURNING id",
                name,
                hashed,
                admin,
                name.title(),
                T0,
            )
        )
        # Determined gives every user a personal group.
        self.conn.execute(
            "INSERT INTO groups (group_name, user_id) VALUES (%s, %s)",
            (f"{user_id}DeterminedPersonalGroup", user_id),
        )
        return user_id

    def experiment(
        self,
        *,
        config: dict[str, Any],
        state: str,
        owner: int,
        project: int,
        notes: str = "",
        archived: bool = False,
        ended: bool = True,
        progress: float | None = None,
    ) -> int:
        job_id = str(uuid.uuid4())
        self.conn.execute(
            "INSERT INTO jobs (job_id, job_type, owner_id) VALUES (%s, 'EXPERIMENT', %s)",
            (job_id, owner),
        )
        original = (
            f"name: {config['name']}\nentrypoint: {config['entrypoint']}\n"
            f"searcher:\n  name: {config['searcher']['name']}\n"
            f"  metric: validation_loss\n  max_length:\n    batches: 400\n"
        )
        return int(
            self.one(
                "INSERT INTO experiments (state, config, model_definition, start_time, end_time, "
                "archived, owner_id, progress, original_config, notes, job_id, project_id) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                state,
                Jsonb(config),
                _model_definition(),
                T0,
                T0 + dt.timedelta(hours=2) if ended else None,
                archived,
                owner,
                progress,
                original,
                notes,
                job_id,
                project,
            )
        )

    def trial(
        self,
        experiment_id: int,
        project: int,
        hparams: dict[str, Any],
        state: str,
        *,
        restarts: int = 0,
        ended: bool = True,
        seed_value: int = 0,
    ) -> SeededTrial:
        request_id = str(uuid.uuid4())
        task_id = f"{experiment_id}.{request_id}"
        job_id = self.one("SELECT job_id FROM experiments WHERE id = %s", experiment_id)
        self.conn.execute(
            "INSERT INTO tasks (task_id, task_type, start_time, end_time, job_id, log_version) "
            "VALUES (%s, 'TRIAL', %s, %s, %s, 1)",
            (task_id, _naive(T0), _naive(T0 + dt.timedelta(hours=1)) if ended else None, job_id),
        )
        local_id = self.one(
            "UPDATE projects SET max_local_id = max_local_id + 1 WHERE id = %s "
            "RETURNING max_local_id",
            project,
        )
        run_id = int(
            self.one(
                "INSERT INTO runs (experiment_id, state, start_time, end_time, hparams, "
                "restarts, restart_id, project_id, local_id, runner_state) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                experiment_id,
                state,
                T0,
                T0 + dt.timedelta(hours=1) if ended else None,
                Jsonb(hparams),
                restarts,
                restarts,
                project,
                local_id,
                "" if ended else "training",
            )
        )
        self.conn.execute(
            "INSERT INTO trials_v2 (run_id, request_id, seed) VALUES (%s, %s, %s)",
            (run_id, request_id, seed_value),
        )
        self.conn.execute(
            "INSERT INTO run_id_task_id (run_id, task_id) VALUES (%s, %s)", (run_id, task_id)
        )
        for n in range(restarts + 1):
            last = n == restarts
            self.conn.execute(
                "INSERT INTO allocations (task_id, allocation_id, resource_pool, start_time, "
                "end_time, slots, state, is_ready) VALUES (%s, %s, 'default', %s, %s, 1, %s, %s)",
                (
                    task_id,
                    f"{task_id}.{n}",
                    _naive(T0),
                    None if (last and not ended) else _naive(T0 + dt.timedelta(minutes=30)),
                    "RUNNING" if (last and not ended) else "TERMINATED",
                    True,
                ),
            )
        return SeededTrial(
            id=run_id,
            experiment_id=experiment_id,
            task_id=task_id,
            hparams=hparams,
            state=state,
            steps=0,
        )

    def log(self, trial: SeededTrial, line: str, *, raw: bytes | None = None) -> None:
        """A line of the trial's task log, as the agent ships it (``raw``: bytes that are not
        UTF-8)."""
        allocation = self.one(
            "SELECT allocation_id FROM allocations WHERE task_id = %s "
            "ORDER BY allocation_id DESC LIMIT 1",
            trial.task_id,
        )
        self.conn.execute(
            "INSERT INTO task_logs (task_id, allocation_id, agent_id, container_id, rank_id, "
            'source, stdtype, level, "timestamp", log) '
            "VALUES (%s, %s, 'agent-1', 'c0ffee', 0, 'agent', 'stdout', 'INFO', %s, %s)",
            (trial.task_id, allocation, _naive(T0), raw if raw is not None else line.encode()),
        )
        trial.log_lines.append(line)

    def report(
        self,
        trial: SeededTrial,
        steps: int,
        loss: float,
        *,
        run: int = 0,
        when: dt.datetime | None = None,
    ) -> None:
        """Training metrics at ``steps`` (at ``when``, else ``steps`` seconds after T0), and
        every 100 batches a validation and a checkpoint (with its files) as the harness
        reports them."""
        when = when or T0 + dt.timedelta(seconds=steps)
        self.conn.execute(
            "INSERT INTO raw_steps (trial_id, end_time, metrics, total_batches, trial_run_id) "
            "VALUES (%s, %s, %s, %s, %s)",
            (
                trial.id,
                when,
                Jsonb({"avg_metrics": {"loss": loss}, "batch_metrics": [{"loss": loss}]}),
                steps,
                run,
            ),
        )
        trial.training_reports += 1
        trial.steps = max(trial.steps, steps)
        if steps % 100:
            return
        val = round(loss * 1.1, 6)
        self.conn.execute(
            "INSERT INTO raw_validations (trial_id, end_time, metrics, total_batches, "
            "trial_run_id) VALUES (%s, %s, %s, %s, %s)",
            (
                trial.id,
                when,
                Jsonb({"validation_metrics": {"validation_loss": val, "accuracy": 1 - val}}),
                steps,
                run,
            ),
        )
        trial.validation_reports += 1
        self.checkpoint(trial, steps, when, val)

    def checkpoint(self, trial: SeededTrial, steps: int, when: dt.datetime, val: float) -> None:
        ckpt = str(uuid.uuid4())
        folder = self.storage / ckpt
        folder.mkdir(parents=True)
        files = {
            "state_dict.pth": f"weights of trial {trial.id} at {steps}\n".encode() * 20,
            "metadata.json": json.dumps({"steps_completed": steps}).encode(),
            "code/train.py": b"print('training')\n",
        }
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        resources = {name: len(data) for name, data in files.items()}
        resources["code/"] = 0
        metadata = {
            "determined_version": "0.38.1",
            "format": "pickle",
            "framework": "torch-2.3.0",
            "steps_completed": steps,
        }
        allocation = self.one(
            "SELECT allocation_id FROM allocations WHERE task_id = %s "
            "ORDER BY allocation_id DESC LIMIT 1",
            trial.task_id,
        )
        self.conn.execute(
            "INSERT INTO checkpoints_v2 (uuid, task_id, allocation_id, report_time, state, "
            "resources, metadata, size, storage_id) "
            "VALUES (%s, %s, %s, %s, 'COMPLETED', %s, %s, %s, %s)",
            (
                ckpt,
                trial.task_id,
                allocation,
                when,
                Jsonb(resources),
                Jsonb(metadata),
                sum(resources.values()),
                self.storage_id,
            ),
        )
        self.conn.execute(
            "INSERT INTO run_checkpoints (run_id, checkpoint_id) VALUES (%s, %s)", (trial.id, ckpt)
        )
        trial.checkpoints.append(ckpt)
        if trial.best_value is None or val < trial.best_value:
            trial.best_checkpoint, trial.best_value = ckpt, val

    def custom(self, trial: SeededTrial, steps: int, latency: float) -> None:
        self.conn.execute(
            "INSERT INTO generic_metrics (trial_id, end_time, metrics, total_batches, "
            "metric_group) VALUES (%s, %s, %s, %s, 'inference')",
            (
                trial.id,
                T0 + dt.timedelta(seconds=steps),
                Jsonb({"avg_metrics": {"latency_ms": latency}}),
                steps,
            ),
        )
        trial.custom_reports += 1

    def finish_trial(self, trial: SeededTrial, searcher_value: float) -> None:
        """What Determined keeps up to date on ``runs`` as reports arrive."""
        self.conn.execute(
            "UPDATE runs SET total_batches = %s, searcher_metric_value = %s, "
            "searcher_metric_value_signed = %s, checkpoint_count = %s WHERE id = %s",
            (trial.steps, searcher_value, searcher_value, len(trial.checkpoints), trial.id),
        )


def seed(url: str, storage: Path) -> Seeded:
    """Fill the Determined database at ``url`` (see the module docstring); checkpoint files go
    under ``storage`` (the ``shared_fs`` ``host_path``)."""
    storage.mkdir(parents=True, exist_ok=True)
    with psycopg.connect(url) as conn:
        w = _Writer(conn, storage)
        conn.execute("INSERT INTO cluster_id (cluster_id) VALUES (%s)", (CLUSTER_ID,))
        passwords = {"alice": "Alice-Old-Password-1", "bob": "bob-older-pw"}
        users = {
            "alice": w.user("alice", passwords["alice"], 15),
            "bob": w.user("bob", passwords["bob"], 10, admin=True),
        }
        workspace = int(
            w.one(
                "INSERT INTO workspaces (name, user_id, created_at) VALUES ('vision', %s, %s) "
                "RETURNING id",
                users["alice"],
                T0,
            )
        )
        project = int(
            w.one(
                "INSERT INTO projects (name, description, workspace_id, user_id, notes, key, "
                "created_at) VALUES ('mnist', 'digits', %s, %s, %s, 'MNIST', %s) RETURNING id",
                workspace,
                users["alice"],
                Jsonb([{"name": "Plan", "contents": "try ASHA first"}]),
                T0,
            )
        )
        trials: dict[int, SeededTrial] = {}

        # An adaptive ASHA search: four trials, the two worst stopped at the first rung.
        asha_config = _config(
            "mnist-asha",
            {
                "name": "adaptive_asha",
                "max_length": {"batches": 400},
                "max_trials": 4,
                "max_rungs": 5,
                "divisor": 4,
                "mode": "standard",
                "bracket_rungs": [],
                "max_concurrent_trials": 0,
                "stop_once": False,
            },
            storage,
            labels=["mnist", "asha"],
            description="digits sweep",
        )
        asha = w.experiment(
            config=asha_config,
            state="COMPLETED",
            owner=users["alice"],
            project=project,
            notes="# Sweep\nlr matters most.",
            progress=1.0,
        )
        for n, (lr, hidden, length) in enumerate(
            [(0.001, 64, 400), (0.01, 128, 400), (0.1, 32, 100), (0.0001, 256, 100)]
        ):
            trial = w.trial(
                asha,
                project,
                {"global_batch_size": 64, "lr": lr, "hidden": hidden},
                "COMPLETED",
                seed_value=1000 + n,
            )
            for steps in range(50, length + 1, 50):
                w.report(trial, steps, round(1.0 / (1 + steps * lr * 10) + n * 0.01, 6))
            w.custom(trial, length, 3.5 + n)
            w.log(trial, f"trial {trial.id}: training with lr={lr}\n")
            w.log(trial, "loss went \ufffd up\n", raw=b"loss went \xff up\n")
            w.finish_trial(trial, round(1.1 / (1 + length * lr * 10) + n * 0.011, 6))
            trials[trial.id] = trial

        # A single-trial experiment still running: its trial restarted once.
        single = w.experiment(
            config=_config(
                "mnist-single",
                {"name": "single", "max_length": {"batches": 400}},
                storage,
                labels=["mnist"],
            ),
            state="ACTIVE",
            owner=users["bob"],
            project=project,
            ended=False,
            progress=0.5,
        )
        trial = w.trial(
            single,
            project,
            {"global_batch_size": 64, "lr": 0.01, "hidden": 128},
            "RUNNING",
            restarts=1,
            ended=False,
        )
        for steps in range(50, 201, 50):
            w.report(trial, steps, round(1.0 / (1 + steps * 0.1), 6), run=1)
        w.finish_trial(trial, 0.1)
        trials[trial.id] = trial

        # An old single-trial baseline, archived, in Uncategorized.
        archived = w.experiment(
            config=_config(
                "old-baseline", {"name": "single", "max_length": {"batches": 400}}, storage
            ),
            state="COMPLETED",
            owner=users["alice"],
            project=1,
            archived=True,
        )
        trial = w.trial(
            archived, 1, {"global_batch_size": 64, "lr": 0.05, "hidden": 64}, "COMPLETED"
        )
        for steps in range(50, 101, 50):
            w.report(trial, steps, 0.5)
        w.finish_trial(trial, 0.55)
        trials[trial.id] = trial

        # The model registry: the ASHA search's best checkpoint as version 1.
        best_trial = min(
            (t for t in trials.values() if t.experiment_id == asha),
            key=lambda t: w.one("SELECT searcher_metric_value FROM runs WHERE id = %s", t.id),
        )
        assert best_trial.best_checkpoint is not None
        model = int(
            w.one(
                "INSERT INTO models (name, description, creation_time, last_updated_time, "
                "metadata, labels, user_id, notes, workspace_id) "
                "VALUES ('mnist-cnn', 'the digits model', %s, %s, %s, %s, %s, 'ship it', %s) "
                "RETURNING id",
                T0,
                T0,
                Jsonb({"team": "vision"}),
                ["prod"],
                users["alice"],
                workspace,
            )
        )
        w.conn.execute(
            "INSERT INTO model_versions (version, checkpoint_uuid, creation_time, "
            "last_updated_time, metadata, model_id, id, name, comment, user_id, labels, notes) "
            "VALUES (1, %s, %s, %s, %s, %s, 1, 'v1', 'first', %s, %s, 'from the sweep')",
            (
                best_trial.best_checkpoint,
                T0,
                T0,
                Jsonb({"accuracy": 0.98}),
                model,
                users["alice"],
                ["candidate"],
            ),
        )
        w.conn.execute(
            "INSERT INTO templates (name, config, workspace_id) VALUES ('gpu-defaults', %s, %s)",
            (Jsonb({"resources": {"slots_per_trial": 2}, "max_restarts": 1}), workspace),
        )
        hook = w.one(
            "INSERT INTO webhooks (url, webhook_type, workspace_id, name, mode) "
            "VALUES ('https://hooks.example.org/det', 'DEFAULT', %s, 'team-hook', 'WORKSPACE') "
            "RETURNING id",
            workspace,
        )
        w.conn.execute(
            "INSERT INTO webhook_triggers (trigger_type, condition, webhook_id) "
            "VALUES ('EXPERIMENT_STATE_CHANGE', %s, %s)",
            (Jsonb({"state": "COMPLETED"}), hook),
        )
        conn.commit()
    return Seeded(
        passwords=passwords,
        user_ids=users,
        workspace_id=workspace,
        project_id=project,
        asha_id=asha,
        single_id=single,
        archived_id=archived,
        trials=trials,
        model_id=model,
        model_checkpoint=best_trial.best_checkpoint,
        storage_dir=storage,
    )


def _metric_lines(trial_id: int, count: int, run: int) -> Iterator[bytes]:
    for n in range(count):
        when = (T0 + dt.timedelta(seconds=n)).isoformat()
        metrics = json.dumps({"avg_metrics": {"loss": 1.0 / (n + 1)}, "batch_metrics": []})
        yield f"{trial_id}\t{when}\t{metrics}\t{n + 1}\t{run}\tf\n".encode()


def add_training_metrics(url: str, trial_id: int, count: int, run: int = 7) -> None:
    """``count`` more training reports of Determined trial ``trial_id``, steps 1 to
    ``count`` of its run ``run`` (COPY: a million in seconds), for the importer's throughput
    and interruption tests."""
    with psycopg.connect(url) as conn:
        with conn.cursor().copy(
            "COPY raw_steps (trial_id, end_time, metrics, total_batches, trial_run_id, archived) "
            "FROM STDIN"
        ) as copy:
            chunk: list[bytes] = []
            for line in _metric_lines(trial_id, count, run):
                chunk.append(line)
                if len(chunk) >= 10_000:
                    copy.write(b"".join(chunk))
                    chunk.clear()
            if chunk:
                copy.write(b"".join(chunk))
        conn.commit()


def add_trial(url: str, storage: Path, experiment_id: int, project_id: int) -> SeededTrial:
    """One more COMPLETED trial of experiment ``experiment_id``, with training and validation
    metrics and checkpoints, as a search that goes on creates them."""
    with psycopg.connect(url) as conn:
        w = _Writer(conn, storage)
        trial = w.trial(
            experiment_id,
            project_id,
            {"global_batch_size": 64, "lr": 0.02, "hidden": 96},
            "COMPLETED",
            seed_value=2000,
        )
        for steps in range(50, 201, 50):
            w.report(trial, steps, round(1.0 / (1 + steps * 0.2), 6))
        w.finish_trial(trial, 0.03)
        conn.commit()
    return trial


@dataclass
class LiveSearches:
    """What :func:`add_live_searches` wrote: the two experiments and their trials by role."""

    asha_id: int
    asha_max_trials: int
    random_id: int
    random_max_trials: int
    trials: dict[str, SeededTrial]
    """``asha-best`` (reached the top rung), ``asha-stopped-1``/``-2`` (stopped at the first
    rung), ``asha-running`` (promoted, running), ``asha-young`` (running, before its first
    validation), ``asha-errored``; ``random-done``, ``random-running``."""


def _timed_trial(
    w: _Writer,
    experiment_id: int,
    project: int,
    hparams: dict[str, Any],
    state: str,
    *,
    start: dt.timedelta,
    end: dt.timedelta | None,
    seed_value: int,
) -> SeededTrial:
    trial = w.trial(
        experiment_id, project, hparams, state, ended=end is not None, seed_value=seed_value
    )
    w.conn.execute(
        "UPDATE runs SET start_time = %s, end_time = %s WHERE id = %s",
        (T0 + start, T0 + end if end is not None else None, trial.id),
    )
    return trial


def add_live_searches(url: str, storage: Path, project: int, owner: int) -> LiveSearches:
    """Two searches caught running, as Determined's master leaves them mid-way.

    ``live-asha`` (adaptive ASHA, aggressive: one bracket, rungs at 100 and 400 batches, six
    trials, three at a time), in order of events: three trials start; the second and third
    rank below the first at the first rung and are stopped (COMPLETED at 100 batches), their
    replacements start; the first reaches 400 and completes, its replacement errors at once.
    Two are still RUNNING with checkpoints: one promoted past the first rung (at 200 batches),
    one before its first validation (a checkpoint at 50). ``live-random`` (random, three
    trials, two at a time): one COMPLETED, one RUNNING with a checkpoint, and the third not
    created yet (Determined's master was between the first's exit and its replacement)."""
    minutes = dt.timedelta(minutes=1)
    with psycopg.connect(url) as conn:
        w = _Writer(conn, storage)
        asha_config = _config(
            "live-asha",
            {
                "name": "adaptive_asha",
                "max_length": {"batches": 400},
                "max_trials": 6,
                "max_rungs": 5,
                "divisor": 4,
                "mode": "aggressive",
                "bracket_rungs": [],
                "max_concurrent_trials": 3,
                "stop_once": False,
            },
            storage,
        )
        asha = w.experiment(
            config=asha_config, state="ACTIVE", owner=owner, project=project, ended=False
        )
        trials: dict[str, SeededTrial] = {}
        # role, start, end, state, [(steps, minute, loss)]
        plan: list[tuple[str, int, int | None, str, list[tuple[int, int, float]]]] = [
            ("asha-best", 0, 41, "COMPLETED", [(100, 10, 0.3), (200, 20, 0.25), (400, 40, 0.2)]),
            ("asha-stopped-1", 0, 13, "COMPLETED", [(100, 12, 0.5)]),
            ("asha-stopped-2", 0, 15, "COMPLETED", [(100, 14, 0.6)]),
            ("asha-running", 13, None, "RUNNING", [(100, 25, 0.2), (200, 35, 0.15)]),
            ("asha-young", 15, None, "RUNNING", []),
            ("asha-errored", 41, 45, "ERROR", []),
        ]
        for n, (role, start, end, state, reports) in enumerate(plan):
            trial = _timed_trial(
                w,
                asha,
                project,
                {"global_batch_size": 64, "lr": 0.001 * (n + 1), "hidden": 32 + 16 * n},
                state,
                start=start * minutes,
                end=end * minutes if end is not None else None,
                seed_value=3000 + n,
            )
            for steps, minute, loss in reports:
                w.report(trial, steps, loss / 1.1, when=T0 + minute * minutes)
            if role == "asha-young":
                w.report(trial, 50, 0.9, when=T0 + 20 * minutes)
                w.checkpoint(trial, 50, T0 + 20 * minutes, 0.99)
            trials[role] = trial

        random_config = _config(
            "live-random",
            {
                "name": "random",
                "max_trials": 3,
                "max_concurrent_trials": 2,
                "max_length": {"batches": 400},
            },
            storage,
        )
        rand = w.experiment(
            config=random_config, state="ACTIVE", owner=owner, project=project, ended=False
        )
        done = _timed_trial(
            w,
            rand,
            project,
            {"global_batch_size": 64, "lr": 0.01, "hidden": 64},
            "COMPLETED",
            start=dt.timedelta(0),
            end=30 * minutes,
            seed_value=4000,
        )
        for steps in (100, 200, 300, 400):
            w.report(done, steps, 1.0 / steps, when=T0 + steps // 20 * minutes)
        running = _timed_trial(
            w,
            rand,
            project,
            {"global_batch_size": 64, "lr": 0.02, "hidden": 96},
            "RUNNING",
            start=dt.timedelta(0),
            end=None,
            seed_value=4001,
        )
        for steps in (100, 200):
            w.report(running, steps, 2.0 / steps, when=T0 + steps // 20 * minutes)
        trials["random-done"], trials["random-running"] = done, running
        conn.commit()
    return LiveSearches(
        asha_id=asha, asha_max_trials=6, random_id=rand, random_max_trials=3, trials=trials
    )
