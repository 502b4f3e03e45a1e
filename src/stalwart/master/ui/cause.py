"""UI-only endpoints: why a trial or an experiment failed, for the banner the UI shows first
on a failed run (a Stalwart extension; the shapes are in ``docs/contributing/logs.md``).

- ``GET /api/v1/ui/trials/{trial_id}/cause``: :class:`TrialCauseResponse`.
- ``GET /api/v1/ui/experiments/{experiment_id}/cause``: :class:`ExperimentCauseResponse`.

Both need a signed-in caller who may read the trial / experiment (the workspace rules of
:mod:`stalwart.master.policy`, from the path parameter, exactly as for its logs); what they
return is decided by :mod:`stalwart.master.services.run_cause`. The log lines have the run's
secrets masked, as the logs API serves them.
"""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter
from pydantic import Field

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.logs import task_secrets
from stalwart.master.api.models.common import WireModel, wire_time
from stalwart.master.api.models.logs import TaskLogsResponse
from stalwart.master.api.wire.logs import task_log_to_wire
from stalwart.master.redact import redact_text
from stalwart.master.services import run_cause
from stalwart.master.state import MasterState

__all__ = [
    "ExperimentCauseResponse",
    "FailureOut",
    "PolicyTriggerOut",
    "TrialCauseResponse",
    "router",
]

router = APIRouter(tags=["ui"])


class FailureOut(WireModel):
    """The trial's last failed allocation."""

    allocation_id: str = Field(description="The allocation (one run of the trial).")
    exit_code: int | None = Field(
        description="Its exit code; negative: killed by that signal; null: lost or never ran."
    )
    exit_reason: str = Field(description="Why it ended, in the words of the trial's log.")
    agent_id: str | None = Field(description="The agent it ran on, if known.")
    start_time: str = Field(description="When it was allocated (RFC 3339, UTC).")
    end_time: str | None = Field(description="When it ended (RFC 3339, UTC).")


class PolicyTriggerOut(WireModel):
    """A ``cancel_retries`` log policy that matched."""

    pattern: str = Field(description="The policy's regular expression.")
    line: str = Field(description="The first log line it matched.")


class TrialCauseResponse(WireModel):
    """Why a trial failed; ``failure`` null and empty lists for a trial that did not."""

    trial_id: int = Field(description="The trial.")
    experiment_id: int = Field(description="Its experiment.")
    state: str = Field(description="The trial's state, e.g. STATE_ERROR.")
    restarts: int = Field(description="How many times it was restarted after a failure.")
    failed: bool = Field(description="Whether the trial is in STATE_ERROR.")
    failure: FailureOut | None = Field(
        description="Its last failed allocation (ERROR, or restarted after a failure)."
    )
    log_policy_matched: str | None = Field(
        description="The label of the last named log policy a line matched (e.g. CUDA OOM)."
    )
    dont_retry: list[PolicyTriggerOut] = Field(
        description="cancel_retries policies that matched (why it was not restarted)."
    )
    excluded_agents: list[str] = Field(description="Agents exclude_node policies keep it off.")
    lines_kind: str = Field(
        description="'errors': error/stderr lines; 'last': its last lines (no errors); 'none'."
    )
    lines: list[TaskLogsResponse] = Field(
        description="Up to 20 lines of the failed allocation, oldest first (task log shape)."
    )


class ExperimentCauseResponse(WireModel):
    """Why an experiment failed: its errored trials and the first one's cause."""

    experiment_id: int = Field(description="The experiment.")
    state: str = Field(description="The experiment's state, e.g. STATE_ERROR.")
    trials_errored: int = Field(description="How many of its trials are in STATE_ERROR.")
    first_errored_trial: TrialCauseResponse | None = Field(
        description="The cause of the first trial that errored (null: none did)."
    )


def _trial_out(state: MasterState, cause: run_cause.TrialCause) -> TrialCauseResponse:
    secrets = task_secrets(state, cause.task_id) if cause.lines else []
    lines = [
        task_log_to_wire(dataclasses.replace(line, log=redact_text(line.log, secrets)))
        if secrets
        else task_log_to_wire(line)
        for line in cause.lines
    ]
    failure = cause.failure
    return TrialCauseResponse(
        trial_id=cause.trial_id,
        experiment_id=cause.experiment_id,
        state=f"STATE_{cause.state}",
        restarts=cause.restarts,
        failed=cause.failed,
        failure=None
        if failure is None
        else FailureOut(
            allocation_id=failure.allocation_id,
            exit_code=failure.exit_code,
            exit_reason=failure.exit_reason,
            agent_id=failure.agent_id,
            start_time=wire_time(failure.start_time) or "",
            end_time=wire_time(failure.end_time),
        ),
        log_policy_matched=cause.log_policy_matched,
        dont_retry=[PolicyTriggerOut(pattern=t.pattern, line=t.line) for t in cause.dont_retry],
        excluded_agents=cause.excluded_agents,
        lines_kind=cause.lines_kind,
        lines=lines,
    )


@router.get("/ui/trials/{trial_id}/cause", response_model=TrialCauseResponse)
def trial_cause(
    trial_id: int, _caller: CallerDep, session: SessionDep, state: StateDep
) -> TrialCauseResponse:
    """Why the trial failed (see :mod:`stalwart.master.services.run_cause`)."""
    cause = run_cause.trial_cause(session, trial_id)
    session.close()
    return _trial_out(state, cause)


@router.get("/ui/experiments/{experiment_id}/cause", response_model=ExperimentCauseResponse)
def experiment_cause(
    experiment_id: int, _caller: CallerDep, session: SessionDep, state: StateDep
) -> ExperimentCauseResponse:
    """Why the experiment failed: its errored trials and the first one's cause."""
    cause = run_cause.experiment_cause(session, experiment_id)
    session.close()
    first = cause.first_errored
    return ExperimentCauseResponse(
        experiment_id=cause.experiment_id,
        state=f"STATE_{cause.state}",
        trials_errored=cause.trials_errored,
        first_errored_trial=None if first is None else _trial_out(state, first),
    )
