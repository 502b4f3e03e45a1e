"""A trial as the SDK sees it: its state, logs, metrics and checkpoints."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stalwart.client.checkpoint import Checkpoint, strip_state
from stalwart.client.frames import FrameLibrary, metrics_frame
from stalwart.client.models import (
    CheckpointsResponse,
    GetTrialResponse,
    GetTrialWorkloadsResponse,
    MetricsReport,
    MetricsReportsResponse,
    TrialLogsResponse,
    V1Trial,
    WorkloadContainer,
)
from stalwart.client.session import Session
from stalwart.errors import InvalidArgumentError

__all__ = ["TRIAL_TERMINAL_STATES", "Trial"]

TRIAL_TERMINAL_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR"})
"""States a trial never leaves."""


class Trial:
    """One trial (``id``, ``experiment_id``, ``state``, ``hparams``; ``data`` holds all).

    ``data`` is what the master said when this object was made or last :meth:`reload`-ed.
    """

    def __init__(self, session: Session, data: V1Trial) -> None:
        self._session = session
        self.data = data

    def __repr__(self) -> str:
        return f"Trial(id={self.id}, state={self.state!r})"

    @property
    def id(self) -> int:
        return self.data.id

    @property
    def experiment_id(self) -> int:
        return self.data.experiment_id

    @property
    def state(self) -> str:
        """``RUNNING``, ``COMPLETED``, ... (no ``STATE_`` prefix)."""
        return strip_state(self.data.state)

    @property
    def hparams(self) -> dict[str, Any]:
        return self.data.hparams

    def reload(self) -> Trial:
        """Read the trial again; returns ``self``."""
        self.data = self._session.get(f"/api/v1/trials/{self.id}", GetTrialResponse).trial
        return self

    def kill(self) -> None:
        """Kill the trial (its experiment goes on with the others)."""
        self._session.post(f"/api/v1/trials/{self.id}/kill")

    def logs(
        self, *, follow: bool = False, head: int | None = None, tail: int | None = None
    ) -> Iterator[TrialLogsResponse]:
        """The trial's log lines, oldest first.

        ``head`` N: the first N lines; ``tail`` N: the last N; ``follow``: keep streaming until
        the trial is terminal and its logs are drained (not with ``head`` or ``tail``).
        """
        if head is not None and tail is not None:
            raise InvalidArgumentError("give head or tail, not both")
        if follow and (head is not None or tail is not None):
            raise InvalidArgumentError("follow cannot be combined with head or tail")
        params: dict[str, Any] = {"follow": "true" if follow else "false"}
        if head is not None:
            params["limit"] = head
        if tail is not None:
            params["limit"] = tail
            params["orderBy"] = "ORDER_BY_DESC"
        lines = (
            TrialLogsResponse.model_validate(item)
            for item in self._session.stream(
                f"/api/v1/trials/{self.id}/logs", params, follow=follow
            )
        )
        if tail is not None:
            return iter(list(lines)[::-1])  # the master sends the tail newest first
        return lines

    def metrics(self, group: str = "training") -> Iterator[MetricsReport]:
        """Every report of one metrics group (``training``, ``validation`` or a custom one),
        in the order they were reported."""
        params = {"trialIds": self.id, "group": group}
        for item in self._session.stream(
            "/api/v1/trials/metrics/trial_metrics", params, follow=False
        ):
            yield from MetricsReportsResponse.model_validate(item).metrics

    def metrics_dataframe(
        self, group: str = "training", *, library: FrameLibrary = "pandas"
    ) -> Any:
        """Every report of one metrics group as one DataFrame: a row per report, a column per
        metric (see :mod:`stalwart.client.frames`; needs ``stalwart[dataframe]``)."""
        params = {"trialIds": self.id, "group": group}
        return metrics_frame(self._session, "/api/v1/trials/metrics/arrow", params, library)

    def workloads(self) -> list[WorkloadContainer]:
        """Training, validation and checkpoint workloads, merged by batch as the CLI shows."""
        path = f"/api/v1/trials/{self.id}/workloads"
        return self._session.get(path, GetTrialWorkloadsResponse).workloads

    def checkpoints(self) -> list[Checkpoint]:
        """The trial's checkpoints, oldest first."""
        path = f"/api/v1/trials/{self.id}/checkpoints"
        found = self._session.get(path, CheckpointsResponse, {"sortByAttr": "SORT_BY_END_TIME"})
        return [Checkpoint(c) for c in found.checkpoints]
