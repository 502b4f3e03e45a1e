"""``det.get_cluster_info()``: what a task knows about itself, in Determined's shape.

Contract: :func:`get_cluster_info` is None outside a task; inside one it is a
:class:`ClusterInfo` view of :func:`stalwart.core.env.current` (nothing else is read).
``ClusterInfo.trial`` raises :class:`RuntimeError` for tasks that are not trials.
"""

from __future__ import annotations

from typing import Any

from stalwart.core.env import TaskEnv, TrialEnv, current

__all__ = ["ClusterInfo", "TrialInfo", "get_cluster_info"]


class TrialInfo:
    """The trial of a ``TRIAL`` task."""

    def __init__(self, trial: TrialEnv) -> None:
        self._trial = trial

    @property
    def trial_id(self) -> int:
        return self._trial.trial_id

    @property
    def experiment_id(self) -> int:
        return self._trial.experiment_id

    @property
    def trial_seed(self) -> int:
        return self._trial.trial_seed

    @property
    def hparams(self) -> dict[str, Any]:
        """The sampled hyperparameters."""
        return dict(self._trial.hparams)

    @property
    def config(self) -> dict[str, Any]:
        """The experiment's fully defaulted config."""
        return dict(self._trial.config)

    @property
    def _config(self) -> dict[str, Any]:
        return self.config

    @property
    def user_data(self) -> dict[str, Any]:
        """The config's ``data`` section (``{}`` when unset)."""
        data = self._trial.config.get("data")
        return dict(data) if isinstance(data, dict) else {}

    @property
    def steps_completed(self) -> int:
        """Steps completed when this run started (from the checkpoint it resumes)."""
        return self._trial.steps_completed

    @property
    def trial_run_id(self) -> int:
        return self._trial.trial_run_id

    @property
    def _trial_run_id(self) -> int:
        return self._trial.trial_run_id


class ClusterInfo:
    """A running task's facts (the fields of Determined's ``cluster.json`` and friends)."""

    def __init__(self, env: TaskEnv) -> None:
        self._env = env
        self._trial = TrialInfo(env.trial) if env.trial is not None else None

    @property
    def env(self) -> TaskEnv:
        """The task environment this view reads."""
        return self._env

    @property
    def master_url(self) -> str:
        return self._env.master_url

    @property
    def cluster_id(self) -> str:
        return self._env.cluster_id

    @property
    def agent_id(self) -> str:
        return self._env.agent_id

    @property
    def slot_ids(self) -> list[int]:
        return list(self._env.slot_ids)

    @property
    def task_id(self) -> str:
        return self._env.task_id

    @property
    def allocation_id(self) -> str:
        return self._env.allocation_id

    @property
    def session_token(self) -> str:
        return self._env.session_token

    @property
    def task_type(self) -> str:
        return self._env.task_type

    @property
    def master_cert_name(self) -> str | None:
        return None

    @property
    def master_cert_file(self) -> str | None:
        return None

    @property
    def latest_checkpoint(self) -> str | None:
        """The checkpoint this run resumes from (None on a first run)."""
        return self._env.latest_checkpoint

    @property
    def user(self) -> str | None:
        return self._env.user

    @property
    def container_addrs(self) -> list[str]:
        r = self._env.rendezvous
        return list(r.container_addrs) if r is not None else []

    @property
    def container_rank(self) -> int:
        r = self._env.rendezvous
        return r.container_rank if r is not None else 0

    @property
    def container_slot_counts(self) -> list[int]:
        r = self._env.rendezvous
        return list(r.container_slot_counts) if r is not None else [len(self._env.slot_ids)]

    @property
    def trial(self) -> TrialInfo:
        """The trial (:class:`RuntimeError` when the task is not a trial)."""
        if self._trial is None:
            raise RuntimeError(f"trial info is not available: task_type is {self.task_type}")
        return self._trial


def get_cluster_info() -> ClusterInfo | None:
    """This task's :class:`ClusterInfo`, or None outside a task."""
    env = current()
    return ClusterInfo(env) if env is not None else None
