"""The model registry as the SDK sees it: :class:`Model` and :class:`ModelVersion`.

A model is a named series of versions in a workspace; each version is a registered checkpoint,
which the master then never garbage-collects. Objects hold what the master said when they were
made or last :meth:`~Model.reload`-ed; methods that change something update them from the
master's answer. Errors are the master's (NotFoundError for a model you cannot see,
ForbiddenError for a change your workspace role does not allow, FailedPreconditionError for an
archived model or a checkpoint that is not COMPLETED).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from stalwart.client.checkpoint import Checkpoint
from stalwart.client.record import NamedRecord, Record
from stalwart.master.api.models.model_registry import (
    GetModelResponse,
    GetModelVersionResponse,
    GetModelVersionsResponse,
    V1Model,
    V1ModelVersion,
)

__all__ = ["Model", "ModelVersion", "model_path"]


def model_path(identifier: str | int) -> str:
    """``/api/v1/models/<name or id>`` (the name URL-encoded)."""
    return f"/api/v1/models/{quote(str(identifier), safe='')}"


class ModelVersion(Record[V1ModelVersion]):
    """One version of a model (``number``, ``name``, ``checkpoint``; ``data`` holds all)."""

    def __repr__(self) -> str:
        return f"ModelVersion(model={self.data.model.name!r}, number={self.number})"

    @property
    def number(self) -> int:
        """The version number, from 1 (a deleted version's number is never reused)."""
        return self.data.version

    @property
    def model_name(self) -> str:
        return self.data.model.name

    @property
    def name(self) -> str:
        return self.data.name

    @property
    def notes(self) -> str:
        return self.data.notes

    @property
    def comment(self) -> str:
        return self.data.comment

    @property
    def metadata(self) -> dict[str, Any]:
        return self.data.metadata

    @property
    def labels(self) -> list[str]:
        return self.data.labels

    @property
    def checkpoint(self) -> Checkpoint:
        """The registered checkpoint (``.download()`` copies its files here)."""
        return Checkpoint(self.data.checkpoint)

    def _path(self) -> str:
        return f"{model_path(self.data.model.id)}/versions/{self.number}"

    def reload(self) -> ModelVersion:
        """Read the version again; returns ``self``."""
        self.data = self._session.get(self._path(), GetModelVersionResponse).model_version
        return self

    def _patch(self, body: dict[str, Any]) -> ModelVersion:
        self.data = self._patch_answer(self._path(), body, GetModelVersionResponse).model_version
        return self

    def set_name(self, name: str) -> ModelVersion:
        return self._patch({"name": name})

    def set_notes(self, notes: str) -> ModelVersion:
        return self._patch({"notes": notes})

    def set_comment(self, comment: str) -> ModelVersion:
        return self._patch({"comment": comment})

    def set_metadata(self, metadata: Mapping[str, Any]) -> ModelVersion:
        """Replace the version's metadata."""
        return self._patch({"metadata": dict(metadata)})

    def set_labels(self, labels: Iterable[str]) -> ModelVersion:
        """Replace the version's labels."""
        return self._patch({"labels": list(labels)})

    def delete(self) -> None:
        """Delete the version (its checkpoint is no longer kept for it)."""
        self._session.request("DELETE", self._path())


class Model(NamedRecord[V1Model]):
    """A model of the registry (``id``, ``name``, ``workspace_id``...; ``data`` holds all)."""

    def __repr__(self) -> str:
        return f"Model(id={self.id}, name={self.name!r})"

    @property
    def description(self) -> str:
        return self.data.description

    @property
    def notes(self) -> str:
        return self.data.notes

    @property
    def metadata(self) -> dict[str, Any]:
        return self.data.metadata

    @property
    def labels(self) -> list[str]:
        return self.data.labels

    @property
    def workspace_id(self) -> int:
        return self.data.workspace_id

    @property
    def archived(self) -> bool:
        return self.data.archived

    @property
    def num_versions(self) -> int:
        return self.data.num_versions

    def _path(self) -> str:
        return model_path(self.id)

    def reload(self) -> Model:
        """Read the model again; returns ``self``."""
        self.data = self._session.get(self._path(), GetModelResponse).model
        return self

    def _patch(self, body: dict[str, Any]) -> Model:
        self.data = self._patch_answer(self._path(), body, GetModelResponse).model
        return self

    def update(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        notes: str | None = None,
        labels: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Model:
        """Change the given fields at once (None: unchanged; labels and metadata replace)."""
        body: dict[str, Any] = {}
        for key, value in (("name", name), ("description", description), ("notes", notes)):
            if value is not None:
                body[key] = value
        if labels is not None:
            body["labels"] = list(labels)
        if metadata is not None:
            body["metadata"] = dict(metadata)
        return self._patch(body)

    def set_name(self, name: str) -> Model:
        return self._patch({"name": name})

    def set_description(self, description: str) -> Model:
        return self._patch({"description": description})

    def set_notes(self, notes: str) -> Model:
        return self._patch({"notes": notes})

    def set_labels(self, labels: Iterable[str]) -> Model:
        """Replace the model's labels."""
        return self._patch({"labels": list(labels)})

    def add_metadata(self, metadata: Mapping[str, Any]) -> Model:
        """Add (or replace) top-level metadata keys."""
        return self._patch({"metadata": {**self.reload().metadata, **metadata}})

    def remove_metadata(self, keys: Iterable[str]) -> Model:
        """Remove top-level metadata keys (missing ones are ignored)."""
        drop = set(keys)
        kept = {k: v for k, v in self.reload().metadata.items() if k not in drop}
        return self._patch({"metadata": kept})

    def move_to_workspace(self, workspace_name: str) -> Model:
        """Move the model (and its versions) to another workspace."""
        return self._patch({"workspaceName": workspace_name})

    def archive(self) -> Model:
        """Archive: no changes or new versions until :meth:`unarchive`."""
        self._session.post(f"{self._path()}/archive")
        return self.reload()

    def unarchive(self) -> Model:
        self._session.post(f"{self._path()}/unarchive")
        return self.reload()

    def delete(self) -> None:
        """Delete the model and its versions."""
        self._session.request("DELETE", self._path())

    def register_version(
        self,
        checkpoint_uuid: str,
        *,
        name: str | None = None,
        comment: str | None = None,
        notes: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        labels: Iterable[str] | None = None,
    ) -> ModelVersion:
        """Register a COMPLETED checkpoint as the model's next version."""
        body: dict[str, Any] = {"checkpointUuid": checkpoint_uuid, "modelName": self.name}
        for key, value in (("name", name), ("comment", comment), ("notes", notes)):
            if value is not None:
                body[key] = value
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if labels is not None:
            body["labels"] = list(labels)
        answer = self._session.post(f"{self._path()}/versions", body)
        version = ModelVersion(
            self._session, GetModelVersionResponse.model_validate(answer).model_version
        )
        self.data = version.data.model
        return version

    def get_versions(self) -> list[ModelVersion]:
        """Every version, by number (oldest first)."""
        params = {"sortBy": "SORT_BY_VERSION", "orderBy": "ORDER_BY_ASC"}
        found = self._session.get(f"{self._path()}/versions", GetModelVersionsResponse, params)
        self.data = found.model
        return [ModelVersion(self._session, v) for v in found.model_versions]

    def get_version(self, number: int | None = None) -> ModelVersion | None:
        """Version ``number``, or the latest one (None when there is none yet)."""
        if number is None:
            params = {"sortBy": "SORT_BY_VERSION", "orderBy": "ORDER_BY_DESC", "limit": 1}
            path = f"{self._path()}/versions"
            found = self._session.get(path, GetModelVersionsResponse, params)
            latest = found.model_versions
            return ModelVersion(self._session, latest[0]) if latest else None
        data = self._session.get(f"{self._path()}/versions/{number}", GetModelVersionResponse)
        return ModelVersion(self._session, data.model_version)
