"""The wire models the SDK validates the master's answers with: the master's own.

Every module of :mod:`stalwart.master.api.models` imports with the base dependencies only (the
converters from database rows live in :mod:`stalwart.master.api.wire`), so the SDK reads the
master's answers with the very classes the master writes them with
(:class:`~stalwart.master.api.models.common.WireModel`: lowerCamelCase on the wire, unknown keys
ignored). ``tests/client/test_models.py`` checks that this module, and every models module,
imports with FastAPI and SQLAlchemy unimportable.

Two names are the SDK's own: :data:`TaskSummary` is the master's ``AllocationSummary`` and
:data:`TaskSummaryResources` its ``ResourcesSummary``.
"""

from __future__ import annotations

from stalwart.master.api.models.agents import (
    AgentTokenInfo,
    GetAgentsResponse,
    GetAgentTokensResponse,
    GetTaskResponse,
    GetTasksResponse,
    RevokeAgentTokenResponse,
    V1Agent,
    V1Allocation,
    V1Container,
    V1Device,
    V1Slot,
    V1Task,
)
from stalwart.master.api.models.agents import AllocationSummary as TaskSummary
from stalwart.master.api.models.agents import ResourcesSummary as TaskSummaryResources
from stalwart.master.api.models.checkpoints import (
    CheckpointsResponse,
    GetCheckpointResponse,
    V1Checkpoint,
    V1CheckpointTrainingMetadata,
    V1Metrics,
)
from stalwart.master.api.models.common import Pagination
from stalwart.master.api.models.experiments import (
    ContinueExperimentResponse,
    CreateExperimentResponse,
    GetExperimentResponse,
    GetExperimentsResponse,
    ModelDefResponse,
    V1Experiment,
)
from stalwart.master.api.models.info import GetMasterResponse, MasterConfigResponse
from stalwart.master.api.models.interactive import V1InteractiveTask
from stalwart.master.api.models.logs import (
    MasterLogEntry,
    MasterLogsResponse,
    TaskLogsResponse,
    TrialLogsResponse,
)
from stalwart.master.api.models.projects import (
    GetProjectResponse,
    GetWorkspaceProjectsResponse,
    V1Project,
)
from stalwart.master.api.models.templates import (
    GetTemplatesResponse,
    TemplateResponse,
    V1Template,
)
from stalwart.master.api.models.trials import (
    GetExperimentTrialsResponse,
    GetTrialResponse,
    GetTrialWorkloadsResponse,
    MetricsReport,
    MetricsReportsResponse,
    MetricsWorkload,
    V1Trial,
    WorkloadContainer,
)
from stalwart.master.api.models.users import (
    GetUsersResponse,
    LoginResponse,
    MeResponse,
    UserResponse,
    V1User,
)
from stalwart.master.api.models.workspaces import (
    GetWorkspaceResponse,
    GetWorkspacesResponse,
    V1Workspace,
)

__all__ = [
    "AgentTokenInfo",
    "CheckpointsResponse",
    "ContinueExperimentResponse",
    "CreateExperimentResponse",
    "GetAgentTokensResponse",
    "GetAgentsResponse",
    "GetCheckpointResponse",
    "GetExperimentResponse",
    "GetExperimentTrialsResponse",
    "GetExperimentsResponse",
    "GetMasterResponse",
    "GetProjectResponse",
    "GetTaskResponse",
    "GetTasksResponse",
    "GetTemplatesResponse",
    "GetTrialResponse",
    "GetTrialWorkloadsResponse",
    "GetUsersResponse",
    "GetWorkspaceProjectsResponse",
    "GetWorkspaceResponse",
    "GetWorkspacesResponse",
    "LoginResponse",
    "MasterConfigResponse",
    "MasterLogEntry",
    "MasterLogsResponse",
    "MeResponse",
    "MetricsReport",
    "MetricsReportsResponse",
    "MetricsWorkload",
    "ModelDefResponse",
    "Pagination",
    "RevokeAgentTokenResponse",
    "TaskLogsResponse",
    "TaskSummary",
    "TaskSummaryResources",
    "TemplateResponse",
    "TrialLogsResponse",
    "UserResponse",
    "V1Agent",
    "V1Allocation",
    "V1Checkpoint",
    "V1CheckpointTrainingMetadata",
    "V1Container",
    "V1Device",
    "V1Experiment",
    "V1InteractiveTask",
    "V1Metrics",
    "V1Project",
    "V1Slot",
    "V1Task",
    "V1Template",
    "V1Trial",
    "V1User",
    "V1Workspace",
    "WorkloadContainer",
]
