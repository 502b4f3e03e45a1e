"""Reading a Determined 0.38 database, read-only.

:class:`DeterminedSource` opens one PostgreSQL connection whose session is read-only
(``default_transaction_read_only``, and psycopg's ``read_only``): nothing the importer does can
write to the team's Determined database, whatever the SQL. Everything is read from Determined's
base tables (``runs``, ``trials_v2``, ``checkpoints_v2``, the metrics partitions...), not from
the views its master recreates at each start, so a database whose master never started after
its last migration reads the same. Rows come back as dicts keyed by column name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Self

import psycopg
from psycopg.rows import dict_row

from stalwart.errors import FailedPreconditionError, InvalidArgumentError

__all__ = ["ENTERPRISE_TABLES", "MIN_SCHEMA_VERSION", "DeterminedSource", "Row"]

Row = dict[str, Any]

MIN_SCHEMA_VERSION = 20240131142701
"""The first Determined migration with the ``runs`` / ``trials_v2`` split (0.29): older
databases are refused (upgrade Determined first)."""

ENTERPRISE_TABLES: dict[str, str] = {
    "oauth.clients": "OAuth clients are a Determined Enterprise feature",
    "scim.users": "SCIM users are a Determined Enterprise feature",
    "task_config_policies": "config policies are a Determined Enterprise feature",
    "workspace_namespace_bindings": "Kubernetes namespace bindings are not imported",
    "role_assignments": "RBAC role assignments are not imported: give roles with `det rbac`",
    "user_group_membership": "user groups are not imported: recreate them with `det user-group`",
    "task_logs": "task logs are imported only with --task-logs",
    "trial_logs": "the legacy trial_logs table is not imported",
    "rp_workspace_bindings": "resource pool bindings are not imported: pools are this "
    "cluster's own",
    "user_sessions": "login sessions are not imported: users log in again",
}
"""Tables the importer leaves alone, and why (counted in the report when they hold rows that
matter: personal groups and built-in role rows are not counted)."""

_NOT_COUNTED = {
    "user_group_membership": "SELECT count(*) FROM user_group_membership m JOIN groups g "
    "ON g.id = m.group_id WHERE g.user_id IS NULL",
    "role_assignments": "SELECT count(*) FROM role_assignments a "
    "JOIN groups g ON g.id = a.group_id JOIN roles r ON r.id = a.role_id "
    "JOIN role_assignment_scopes s ON s.id = a.scope_id LEFT JOIN users u ON u.id = g.user_id "
    "WHERE NOT (r.role_name = 'ClusterAdmin' AND s.scope_workspace_id IS NULL "
    "AND u.admin IS TRUE)",
}
"""Count queries for tables whose built-in rows are no loss: users' personal groups, and the
ClusterAdmin role of admin users (Stalwart's ``admin`` flag, which is imported)."""

_STORAGE_KINDS = {
    "shared_fs_id": ("shared_fs", "storage_backend_shared_fs"),
    "s3_id": ("s3", "storage_backend_s3"),
    "gcs_id": ("gcs", "storage_backend_gcs"),
    "azure_id": ("azure", "storage_backend_azure"),
    "directory_id": ("directory", "storage_backend_directory"),
}


def _libpq_url(url: str) -> str:
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    if not url.startswith("postgresql://"):
        raise InvalidArgumentError(
            f"--from must be a PostgreSQL URL (postgresql://USER@HOST:PORT/DATABASE), not {url!r}"
        )
    return url


class DeterminedSource:
    """A read-only session on a Determined database (a context manager; close to end it)."""

    def __init__(self, url: str) -> None:
        try:
            self.conn: psycopg.Connection[Row] = psycopg.connect(
                _libpq_url(url),
                row_factory=dict_row,
                options="-c default_transaction_read_only=on",
            )
        except psycopg.OperationalError as exc:
            raise FailedPreconditionError(
                f"cannot open the Determined database: {str(exc).strip()}"
            ) from None
        self.conn.read_only = True
        self.schema_version = self._schema_version()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the read-only session (nothing was written: it is rolled back)."""
        self.conn.rollback()
        self.conn.close()

    def _schema_version(self) -> int:
        try:
            row = self.conn.execute("SELECT max(version) AS v FROM gopg_migrations").fetchone()
        except psycopg.errors.UndefinedTable:
            self.conn.rollback()
            raise FailedPreconditionError(
                "this is not a Determined database (it has no gopg_migrations table)"
            ) from None
        version = int(row["v"] or 0) if row else 0
        if version < MIN_SCHEMA_VERSION:
            raise FailedPreconditionError(
                f"this Determined database is at migration {version}: the importer reads "
                "Determined 0.29 and later (0.38.x is tested); upgrade Determined first"
            )
        return version

    def all(self, sql: str, *params: Any) -> list[Row]:
        """Every row of a query."""
        return self.conn.execute(sql, params).fetchall()

    def cluster_id(self) -> str:
        """The Determined cluster's id: names the source in the import mapping."""
        row = self.conn.execute("SELECT cluster_id FROM cluster_id LIMIT 1").fetchone()
        if row is None:
            raise FailedPreconditionError("the Determined database has no cluster id")
        return str(row["cluster_id"])

    def users(self) -> list[Row]:
        return self.all("SELECT * FROM users ORDER BY id")

    def workspaces(self) -> list[Row]:
        return self.all("SELECT * FROM workspaces ORDER BY id")

    def projects(self) -> list[Row]:
        return self.all("SELECT * FROM projects ORDER BY id")

    def experiment_ids(self) -> list[Row]:
        """Experiments' ids, projects and states (their configs and model definitions are
        large: read one at a time with :meth:`experiment`)."""
        return self.all("SELECT id, project_id, state FROM experiments ORDER BY id")

    def experiment(self, experiment_id: int) -> Row:
        rows = self.all("SELECT * FROM experiments WHERE id = %s", experiment_id)
        return rows[0]

    def trials(self, experiment_id: int) -> list[Row]:
        """The experiment's trials (Determined's runs with their ``trials_v2`` half), each with
        its task id and its warm-start checkpoint's uuid."""
        return self.all(
            "SELECT r.*, t.request_id, t.seed, "
            "(SELECT min(task_id) FROM run_id_task_id x WHERE x.run_id = r.id) AS task_id, "
            "(SELECT uuid::text FROM checkpoints_v2 c WHERE c.id = r.warm_start_checkpoint_id) "
            "AS warm_start_uuid, "
            "(SELECT c.uuid::text FROM checkpoints_v2 c JOIN run_checkpoints rc "
            "ON rc.checkpoint_id = c.uuid WHERE rc.run_id = r.id AND c.state = 'COMPLETED' "
            "ORDER BY (c.metadata->>'steps_completed')::bigint DESC NULLS LAST, c.report_time "
            "DESC LIMIT 1) AS latest_checkpoint "
            "FROM runs r LEFT JOIN trials_v2 t ON t.run_id = r.id "
            "WHERE r.experiment_id = %s ORDER BY r.id",
            experiment_id,
        )

    def checkpoints(self, experiment_id: int) -> list[Row]:
        """The experiment's checkpoints, each with its trial (``run_id``)."""
        return self.all(
            "SELECT c.*, c.uuid::text AS uuid, rc.run_id FROM checkpoints_v2 c "
            "JOIN run_checkpoints rc ON rc.checkpoint_id = c.uuid "
            "JOIN runs r ON r.id = rc.run_id WHERE r.experiment_id = %s "
            "ORDER BY c.report_time, c.uuid",
            experiment_id,
        )

    def checkpoint(self, uuid: str) -> Row | None:
        """One checkpoint (with its trial, if any), e.g. a model version's."""
        rows = self.all(
            "SELECT c.*, c.uuid::text AS uuid, rc.run_id FROM checkpoints_v2 c "
            "LEFT JOIN run_checkpoints rc ON rc.checkpoint_id = c.uuid WHERE c.uuid = %s",
            uuid,
        )
        return rows[0] if rows else None

    def storage_configs(self) -> dict[int, dict[str, Any]]:
        """Each ``storage_backend`` id's checkpoint storage config (``type`` and Determined's
        fields, nulls left out)."""
        configs: dict[int, dict[str, Any]] = {}
        for row in self.all("SELECT * FROM storage_backend"):
            for column, (kind, table) in _STORAGE_KINDS.items():
                if row[column] is None:
                    continue
                found = self.all(f"SELECT * FROM {table} WHERE id = %s", row[column])
                if found:
                    fields = {k: v for k, v in found[0].items() if k != "id" and v is not None}
                    configs[int(row["id"])] = {"type": kind, **fields}
        return configs

    def metric_count(self, trial_id: int, after: int) -> int:
        """How many metric reports of the trial have an id above ``after``."""
        row = self.conn.execute(
            "SELECT count(*) AS n FROM metrics WHERE trial_id = %s AND id > %s", (trial_id, after)
        ).fetchone()
        return int(row["n"]) if row else 0

    def metrics(self, trial_id: int, after: int, batch: int) -> Iterator[list[Row]]:
        """The trial's metric reports with an id above ``after``, in id order, ``batch`` at a
        time (a server-side cursor: millions of rows stream without filling memory).

        Each row: ``id``, ``end_time``, ``trial_run_id``, ``archived``, ``total_batches``,
        ``metric_group`` (the partition's group when the row has none), and the report's
        metrics as JSON text (``metrics_text``: the ``validation_metrics`` of a validation,
        the ``avg_metrics`` of any other report; ``batch_text``: ``batch_metrics`` when it is a
        list, else None). The JSON stays text from one database to the other: nothing is
        decoded per report.
        """
        with self.conn.cursor(name=f"metrics_{trial_id}") as cursor:
            cursor.itersize = batch
            cursor.execute(
                "SELECT id, end_time, trial_run_id, archived, total_batches, "
                "COALESCE(metric_group, CASE partition_type WHEN 'TRAINING' THEN 'training' "
                "WHEN 'VALIDATION' THEN 'validation' ELSE 'generic' END) AS metric_group, "
                "COALESCE(CASE partition_type WHEN 'VALIDATION' "
                "THEN metrics->'validation_metrics' ELSE metrics->'avg_metrics' END, "
                "'{}'::jsonb)::text AS metrics_text, "
                "CASE WHEN jsonb_typeof(metrics->'batch_metrics') = 'array' "
                "THEN (metrics->'batch_metrics')::text END AS batch_text "
                "FROM metrics WHERE trial_id = %s AND id > %s ORDER BY id",
                (trial_id, after),
            )
            while rows := cursor.fetchmany(batch):
                yield rows

    def validations(self, experiment_id: int) -> list[Row]:
        """The experiment's live (not archived) validation reports, in id order: ``id``,
        ``trial_id``, ``end_time``, ``total_batches`` and ``metrics`` (the
        ``validation_metrics``, decoded), for replaying its search."""
        return self.all(
            "SELECT v.id, v.trial_id, v.end_time, v.total_batches, "
            "COALESCE(v.metrics->'validation_metrics', '{}'::jsonb) AS metrics "
            "FROM raw_validations v JOIN runs r ON r.id = v.trial_id "
            "WHERE r.experiment_id = %s AND NOT v.archived ORDER BY v.id",
            experiment_id,
        )

    def log_count(self, task_id: str, after: int) -> int:
        """How many log lines of the task have an id above ``after``."""
        row = self.conn.execute(
            "SELECT count(*) AS n FROM task_logs WHERE task_id = %s AND id > %s", (task_id, after)
        ).fetchone()
        return int(row["n"]) if row else 0

    def task_logs(self, task_id: str, after: int, batch: int) -> Iterator[list[Row]]:
        """The task's log lines with an id above ``after``, in id order, ``batch`` at a time
        (a server-side cursor)."""
        with self.conn.cursor(name="task_logs") as cursor:
            cursor.itersize = batch
            cursor.execute(
                "SELECT id, allocation_id, agent_id, container_id, rank_id, source, stdtype, "
                'level, "timestamp", log FROM task_logs WHERE task_id = %s AND id > %s '
                "ORDER BY id",
                (task_id, after),
            )
            while rows := cursor.fetchmany(batch):
                yield rows

    def models(self) -> list[Row]:
        return self.all("SELECT * FROM models ORDER BY id")

    def model_versions(self, model_id: int) -> list[Row]:
        return self.all(
            "SELECT *, checkpoint_uuid::text AS checkpoint_uuid FROM model_versions "
            "WHERE model_id = %s ORDER BY version",
            model_id,
        )

    def templates(self) -> list[Row]:
        return self.all("SELECT * FROM templates ORDER BY name")

    def webhooks(self) -> list[Row]:
        return self.all("SELECT * FROM webhooks ORDER BY id")

    def webhook_triggers(self, webhook_id: int) -> list[Row]:
        return self.all(
            "SELECT * FROM webhook_triggers WHERE webhook_id = %s ORDER BY id", webhook_id
        )

    def left_out(self, imported: frozenset[str] = frozenset()) -> dict[str, tuple[int, str]]:
        """The tables the importer leaves alone (but ``imported``) that hold rows:
        ``{table: (rows, why)}``."""
        found: dict[str, tuple[int, str]] = {}
        for table, why in ENTERPRISE_TABLES.items():
            if table in imported:
                continue
            query = _NOT_COUNTED.get(table, f"SELECT count(*) AS n FROM {table}")
            try:
                row = self.conn.execute(query).fetchone()
            except psycopg.errors.UndefinedTable:
                self.conn.rollback()
                continue
            count = int(next(iter(row.values()))) if row else 0
            if count:
                found[table] = (count, why)
        return found
