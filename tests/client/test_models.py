"""The SDK's wire models stay a subset of the master's (field names and required-ness)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import BaseModel

from stalwart.client import models as client_models
from stalwart.master.api import info
from stalwart.master.api.models import agents, checkpoints, experiments, logs, users

PAIRS: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (client_models.V1User, users.V1User),
    (client_models.LoginResponse, users.LoginResponse),
    (client_models.MeResponse, users.MeResponse),
    (client_models.UserResponse, users.UserResponse),
    (client_models.GetUsersResponse, users.GetUsersResponse),
    (client_models.V1Experiment, experiments.V1Experiment),
    (client_models.CreateExperimentResponse, experiments.CreateExperimentResponse),
    (client_models.GetExperimentResponse, experiments.GetExperimentResponse),
    (client_models.GetExperimentsResponse, experiments.GetExperimentsResponse),
    (client_models.ModelDefResponse, experiments.ModelDefResponse),
    (client_models.V1Metrics, checkpoints.V1Metrics),
    (client_models.V1CheckpointTrainingMetadata, checkpoints.V1CheckpointTrainingMetadata),
    (client_models.V1Checkpoint, checkpoints.V1Checkpoint),
    (client_models.GetCheckpointResponse, checkpoints.GetCheckpointResponse),
    (client_models.CheckpointsResponse, checkpoints.CheckpointsResponse),
    (client_models.TrialLogsResponse, logs.TrialLogsResponse),
    (client_models.V1Device, agents.V1Device),
    (client_models.V1Container, agents.V1Container),
    (client_models.V1Slot, agents.V1Slot),
    (client_models.V1Agent, agents.V1Agent),
    (client_models.GetAgentsResponse, agents.GetAgentsResponse),
    (client_models.TaskSummaryResources, agents.ResourcesSummary),
    (client_models.TaskSummary, agents.AllocationSummary),
    (client_models.GetTasksResponse, agents.GetTasksResponse),
    (client_models.GetMasterResponse, info.GetMasterResponse),
    (client_models.MasterConfigResponse, info.MasterConfigResponse),
    (client_models.MasterLogEntry, logs.MasterLogEntry),
    (client_models.MasterLogsResponse, logs.MasterLogsResponse),
]


@pytest.mark.parametrize(("ours", "masters"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_client_fields_exist_on_the_master(ours: type[BaseModel], masters: type[BaseModel]) -> None:
    for name, field in ours.model_fields.items():
        assert name in masters.model_fields, f"{ours.__name__}.{name} is not on the master"
        theirs = masters.model_fields[name]
        # a field the master may omit must not be required here
        assert field.is_required() <= theirs.is_required(), f"{ours.__name__}.{name}"
        assert field.alias == theirs.alias, f"{ours.__name__}.{name}"


def test_the_sdk_imports_without_the_master_dependencies() -> None:
    code = (
        "import sys, stalwart.client, stalwart.cli.main;"
        "bad = {'fastapi', 'sqlalchemy', 'starlette', 'uvicorn'} & "
        "{m.split('.')[0] for m in sys.modules};"
        "print(sorted(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
