"""An experiment as the SDK sees it: state changes, waiting, trials and checkpoints."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from stalwart.client.checkpoint import Checkpoint, strip_state
from stalwart.client.errors import WaitTimeoutError
from stalwart.client.frames import FrameLibrary, metrics_frame
from stalwart.client.models import (
    CheckpointsResponse,
    ContinueExperimentResponse,
    GetExperimentResponse,
    GetExperimentTrialsResponse,
    ModelDefResponse,
    V1Experiment,
)
from stalwart.client.record import NamedRecord
from stalwart.client.session import Session
from stalwart.client.trial import Trial
from stalwart.client.workspace import Workspace, find_workspace

__all__ = ["EXPERIMENT_TERMINAL_STATES", "Experiment", "continue_override_text"]

EXPERIMENT_TERMINAL_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR", "DELETED"})
"""States an experiment never leaves on its own."""


def continue_override_text(config: str | Path | Mapping[str, Any] | None) -> str:
    """The ``overrideConfig`` YAML text of a continue (``""``: no change)."""
    if config is None:
        return ""
    if isinstance(config, Path):
        return config.read_text(encoding="utf-8")
    if isinstance(config, str):
        return config
    return yaml.safe_dump(dict(config), sort_keys=False)


class Experiment(NamedRecord[V1Experiment]):
    """One experiment (``id``, ``name``, ``state``, ``config``; ``data`` holds all).

    ``data`` is what the master said when this object was made or last :meth:`reload`-ed;
    the actions (:meth:`pause`, :meth:`kill`, ...) do not reload it.
    """

    def __init__(self, session: Session, data: V1Experiment) -> None:
        super().__init__(session, data)
        self.notices: list[str] = []
        """From :meth:`Client.create_experiment`: what the master noted about the config."""

    def __repr__(self) -> str:
        return f"Experiment(id={self.id}, state={self.state!r})"

    @property
    def state(self) -> str:
        """``ACTIVE``, ``RUNNING``, ``COMPLETED``, ... (no ``STATE_`` prefix)."""
        return strip_state(self.data.state)

    @property
    def config(self) -> dict[str, Any]:
        """The fully defaulted config the master stored."""
        return self.data.config

    def reload(self) -> Experiment:
        """Read the experiment again; returns ``self``."""
        path = f"/api/v1/experiments/{self.id}"
        self.data = self._session.get(path, GetExperimentResponse).experiment
        return self

    def wait(
        self,
        timeout: float | None = None,
        *,
        interval: float = 0.5,
        on_poll: Callable[[Experiment], None] | None = None,
    ) -> str:
        """Block until the experiment is terminal; its state (``COMPLETED``, ``ERROR``...).

        Polls every ``interval`` seconds, calling ``on_poll(self)`` after each read.
        WaitTimeoutError after ``timeout`` seconds (None: no limit).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if on_poll is not None:
                on_poll(self)
            if self.state in EXPERIMENT_TERMINAL_STATES:
                return self.state
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"experiment {self.id} is still {self.state} after {timeout:g}s",
                    hint=f"wait longer, or stop it with `stalwart experiment kill {self.id}`",
                )
            time.sleep(interval)

    def _act(self, action: str) -> None:
        self._session.post(f"/api/v1/experiments/{self.id}/{action}")

    def pause(self) -> None:
        """ACTIVE -> PAUSED: running trials checkpoint and stop."""
        self._act("pause")

    def activate(self) -> None:
        """PAUSED -> ACTIVE."""
        self._act("activate")

    def cancel(self) -> None:
        """Stop gracefully: trials checkpoint and exit; CANCELED once nothing runs."""
        self._act("cancel")

    def kill(self) -> None:
        """Stop now: trials are killed; CANCELED once nothing runs."""
        self._act("kill")

    def continue_(self, config: str | Path | Mapping[str, Any] | None = None) -> Experiment:
        """Continue this finished single-trial experiment: its trial trains on from its latest
        checkpoint, with ``config`` (YAML text, a YAML file or a mapping, e.g.
        ``{"searcher": {"max_length": {"batches": 20}}}``) merged over the experiment's config.
        Returns ``self``, reloaded (ACTIVE). InvalidArgumentError for a multi-trial search or
        an override that cannot apply; FailedPreconditionError while it has not ended."""
        text = continue_override_text(config)
        answer = self._session.post(
            "/api/v1/experiments/continue", {"id": self.id, "overrideConfig": text}
        )
        self.data = ContinueExperimentResponse.model_validate(answer).experiment
        return self

    def archive(self) -> None:
        """Hide a terminal experiment from default listings."""
        self._act("archive")

    def unarchive(self) -> None:
        """Show an archived experiment again."""
        self._act("unarchive")

    def move_to_project(self, workspace: str, project: str) -> None:
        """Move it to project ``project`` of workspace ``workspace`` (names); it must be yours
        (or you an editor) and you a member there. Reloads it."""
        target = Workspace(self._session, find_workspace(self._session, workspace))
        destination = target.get_project(project)
        body = {"destinationProjectId": destination.id, "experimentId": self.id}
        self._session.post(f"/api/v1/experiments/{self.id}/move", body)
        self.reload()

    def delete(self) -> None:
        """Delete a terminal experiment and its records (checkpoint files stay in storage)."""
        self._session.request("DELETE", f"/api/v1/experiments/{self.id}")

    def trials(self) -> list[Trial]:
        """The experiment's trials, by id."""
        path = f"/api/v1/experiments/{self.id}/trials"
        found = self._session.get(path, GetExperimentTrialsResponse, {"sortBy": "SORT_BY_ID"})
        return [Trial(self._session, t) for t in found.trials]

    def metrics_dataframe(
        self, group: str = "training", *, library: FrameLibrary = "pandas"
    ) -> Any:
        """Every trial's reports of one metrics group as one DataFrame, trial by trial (column
        ``trial_id``; see :mod:`stalwart.client.frames`; needs ``stalwart[dataframe]``)."""
        path = f"/api/v1/experiments/{self.id}/metrics/arrow"
        return metrics_frame(self._session, path, {"group": group}, library)

    def checkpoints(
        self,
        *,
        sort_by: str | None = None,
        order_by: str | None = None,
        states: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[Checkpoint]:
        """The experiment's checkpoints.

        ``sort_by``: a ``checkpointv1SortBy`` name without its prefix (``END_TIME``,
        ``SEARCHER_METRIC``: best first, ...); ``order_by``: ``ASC`` or ``DESC``; ``states``:
        only these (``COMPLETED``, ...); ``limit``: at most this many.
        """
        params: dict[str, Any] = {}
        if sort_by:
            params["sortByAttr"] = f"SORT_BY_{sort_by.removeprefix('SORT_BY_')}"
        if order_by:
            params["orderBy"] = f"ORDER_BY_{order_by.removeprefix('ORDER_BY_')}"
        if states:
            params["states"] = [f"STATE_{strip_state(s)}" for s in states]
        if limit:
            params["limit"] = limit
        path = f"/api/v1/experiments/{self.id}/checkpoints"
        found = self._session.get(path, CheckpointsResponse, params)
        return [Checkpoint(c) for c in found.checkpoints]

    def top_checkpoint(self) -> Checkpoint | None:
        """The completed checkpoint with the best searcher metric (None when there is none)."""
        best = self.checkpoints(sort_by="SEARCHER_METRIC", states=["COMPLETED"], limit=1)
        return best[0] if best else None

    def model_definition(self) -> bytes:
        """The model definition as a ``.tar.gz`` archive (empty when it has none)."""
        path = f"/api/v1/experiments/{self.id}/model_def"
        return base64.b64decode(self._session.get(path, ModelDefResponse).b64_tgz)

    def download_model_def(self, directory: Path = Path(".")) -> Path:
        """Write the model definition to ``<directory>/experiment_<id>_model_def.tgz``."""
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"experiment_{self.id}_model_def.tgz"
        target.write_bytes(self.model_definition())
        return target
