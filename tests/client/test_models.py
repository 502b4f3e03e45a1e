"""The SDK reads answers with the master's own wire models, which import without the master.

``stalwart.client.models`` re-exports the classes of ``stalwart.master.api.models``; so every
module there must import with the base dependencies only (pydantic, PyYAML, httpx...). The guard
below blocks the ``master`` extra's packages outright, so an import of one anywhere on the way
(even an optional one behind ``try``) fails or is noticed.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import textwrap

import pytest
from pydantic import BaseModel

import stalwart.master.api.models as master_models
from stalwart.client import models as client_models
from stalwart.master.api.models.agents import AllocationSummary, ResourcesSummary
from stalwart.master.api.models.common import WireModel

# The packages of the ``master`` extra (and what they pull in) that the SDK must never import.
MASTER_ONLY = ("fastapi", "starlette", "sqlalchemy", "alembic", "uvicorn", "psycopg")

MODEL_MODULES = sorted(
    f"{master_models.__name__}.{info.name}" for info in pkgutil.iter_modules(master_models.__path__)
)


def _run_blocked(imports: list[str]) -> subprocess.CompletedProcess[str]:
    """Import ``imports`` in a fresh interpreter where the master-only packages cannot load."""
    code = textwrap.dedent(
        f"""
        import importlib, sys

        BLOCKED = {MASTER_ONLY!r}

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"blocked: {{name}}", name=name)
                return None

        sys.meta_path.insert(0, Block())
        for module in {imports!r}:
            importlib.import_module(module)
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(BLOCKED))
        assert not loaded, loaded
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_every_models_module_is_found() -> None:
    # a sanity check of the discovery below: the modules the SDK re-exports from are listed
    for name in ("agents", "checkpoints", "common", "experiments", "info", "logs", "trials"):
        assert f"stalwart.master.api.models.{name}" in MODEL_MODULES
    assert "stalwart.master.api.models.users" in MODEL_MODULES


@pytest.mark.parametrize("module", MODEL_MODULES)
def test_models_module_imports_without_the_master_dependencies(module: str) -> None:
    result = _run_blocked([module])
    assert result.returncode == 0, result.stderr


def test_the_sdk_imports_without_the_master_dependencies() -> None:
    result = _run_blocked(["stalwart.client", "stalwart.client.models", "stalwart.cli.main"])
    assert result.returncode == 0, result.stderr


def test_the_sdk_names_are_the_masters_models() -> None:
    for name in client_models.__all__:
        model = getattr(client_models, name)
        assert issubclass(model, BaseModel), name
        assert model.__module__.startswith("stalwart.master.api.models."), name
    assert client_models.TaskSummary is AllocationSummary
    assert client_models.TaskSummaryResources is ResourcesSummary
    assert issubclass(client_models.V1Experiment, WireModel)


def test_master_info_without_stalwart_version() -> None:
    # a master that does not say its Stalwart version (Determined's) reads as unknown
    answer = {"version": "0.38.1", "masterId": "m", "clusterId": "c", "clusterName": "n"}
    assert client_models.GetMasterResponse.model_validate(answer).stalwart_version is None


def test_task_summary_reads_the_container_id() -> None:
    answer = {
        "allocationIdToSummary": {
            "a.1": {
                "taskId": "t",
                "allocationId": "a.1",
                "name": "trial 1",
                "resourcePool": "default",
                "slotsNeeded": 1,
                "resources": [{"resourcesId": "c-1", "allocationId": "a.1", "containerId": "c-1"}],
                "somethingNew": True,
            }
        }
    }
    summary = client_models.GetTasksResponse.model_validate(answer).allocation_id_to_summary["a.1"]
    assert isinstance(summary, client_models.TaskSummary)
    assert summary.resources is not None
    assert summary.resources[0].container_id == "c-1"
