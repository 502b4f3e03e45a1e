"""Creating an experiment: YAML text + model definition -> a stored, fully defaulted config.

Steps (Determined's ``parseCreateExperiment``, wire doc 3.3): parse the YAML; merge the template,
the resource pool's and the master's ``task_container_defaults`` and the checkpoint storage
(the workspace's over the master's); use the workspace's default pool when the config names
none; validate (every problem, as "invalid experiment configuration: ..."); fill the runtime
defaults (name, experiment seed, and each device's task image, chosen by framework detection on
the uploaded model definition); store the experiment with its archive. Nothing is written when
any step fails.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from sqlalchemy.orm import Session

from stalwart.config import DefaultsLayers, load_experiment_config
from stalwart.config.loader import parse_yaml
from stalwart.environments import ImageLayer, resolve_image
from stalwart.environments.images import DEVICE_TYPES
from stalwart.errors import (
    ConfigError,
    EnvironmentResolutionError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master import policy
from stalwart.master.db.tables import Experiment, Project, User, Workspace, utcnow
from stalwart.master.services.model_def import build_archive, extract_archive
from stalwart.master.services.petnames import petname
from stalwart.master.services.pool_bindings import require_pool_usable
from stalwart.master.services.tasks import warm_start_checkpoint
from stalwart.master.services.workspaces import checkpoint_storage_for, default_pool_for
from stalwart.master.settings import MasterSettings

__all__ = ["CreatedExperiment", "create_experiment", "defaulted_config", "fill_images"]

_PREFIX = "invalid experiment configuration: "


@dataclass
class CreatedExperiment:
    """The experiment (not stored when ``validate_only``) and notices for the submitter."""

    experiment: Experiment
    notices: list[str] = field(default_factory=list)


def _invalid(problems: Iterable[str]) -> InvalidArgumentError:
    return InvalidArgumentError(_PREFIX + "; ".join(problems))


def defaulted_config(
    text: str,
    settings: MasterSettings,
    *,
    archive: bytes | None,
    template: Mapping[str, Any] | None = None,
    workspace: Workspace | None = None,
    unmanaged: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """The fully defaulted config for YAML ``text`` and the notices about it; ``workspace``'s
    checkpoint storage goes under the config's own (over the master's), and its default pool
    is used when the config names none.

    Raises InvalidArgumentError ("invalid experiment configuration: ...") for invalid configs and
    for framework conflicts (the message names the config lines to add).
    """
    try:
        doc = parse_yaml(text, "<config>")
        if not isinstance(doc.data, dict):
            raise _invalid(["<config>: must be a mapping of experiment settings"])
        named = _pool_of(doc.data, template)
        fallback = default_pool_for(workspace, _slots_of(doc.data, template))
        pool = named or fallback or "default"
        loaded = load_experiment_config(
            doc,
            DefaultsLayers(
                template=template,
                pool_tcd=settings.pool_task_container_defaults(pool),
                master_tcd=settings.task_container_defaults,
                checkpoint_storage=checkpoint_storage_for(
                    workspace, settings.default_checkpoint_storage
                ),
            ),
            unmanaged=unmanaged,
        )
    except ConfigError as exc:
        raise _invalid(exc.problems) from None
    config = loaded.config.to_dict()
    if named is None and fallback is not None:
        config.setdefault("resources", {})["resource_pool"] = fallback
    notices = list(loaded.warnings)
    if not config.get("name"):
        config["name"] = f"Experiment ({petname()})"
    repro = config.setdefault("reproducibility", {})
    if repro.get("experiment_seed") is None:
        repro["experiment_seed"] = int(time.time())
    notices += fill_images(config, archive)
    return config, notices


def _pool_of(data: Mapping[str, Any], template: Mapping[str, Any] | None) -> str | None:
    for layer in (data, template or {}):
        resources = layer.get("resources")
        if isinstance(resources, Mapping) and resources.get("resource_pool"):
            return str(resources["resource_pool"])
    return None


def _slots_of(data: Mapping[str, Any], template: Mapping[str, Any] | None) -> int:
    """``resources.slots_per_trial`` (1 when unset or not a number)."""
    for layer in (data, template or {}):
        resources = layer.get("resources")
        if isinstance(resources, Mapping) and "slots_per_trial" in resources:
            slots = resources["slots_per_trial"]
            return slots if isinstance(slots, int) else 1
    return 1


def fill_images(config: dict[str, Any], archive: bytes | None) -> list[str]:
    """Fill every unset device image; the model's imports pick the framework's family."""
    environment = config.setdefault("environment", {})
    image = dict(environment.get("image") or {})
    framework = environment.get("framework", "auto")
    notices: list[str] = []
    with tempfile.TemporaryDirectory(prefix="stalwart-model-") as tmp:
        model_dir: Path | None = None
        if archive is not None and any(image.get(d) is None for d in DEVICE_TYPES):
            extract_archive(archive, Path(tmp))
            model_dir = Path(tmp)
        for device in DEVICE_TYPES:
            if image.get(device):
                continue
            try:
                resolution = resolve_image(
                    device,
                    [ImageLayer("experiment", image)],
                    framework=framework,
                    model_dir=model_dir,
                )
            except EnvironmentResolutionError as exc:
                raise _invalid([str(exc)]) from None
            image[device] = resolution.image
            notices += [n for n in resolution.notices if n not in notices]
    environment["image"] = image
    return notices


def _parent_archive(session: Session, owner: User, parent_id: int) -> bytes:
    """The model definition of experiment ``parent_id``, which a fork without files of its own
    runs (as Determined's web UI forks: the edited config and ``parentId``, no files). The
    caller must be able to see the parent; 404 when there is none."""
    parent = session.get(Experiment, parent_id)
    if parent is None:
        raise NotFoundError(f"experiment {parent_id} (the one to fork) not found")
    policy.require_view_experiment(session, owner, parent)
    return parent.model_definition or b""


def create_experiment(
    session: Session,
    settings: MasterSettings,
    owner: User,
    *,
    config_text: str,
    model_definition: Iterable[Mapping[str, Any]],
    activate: bool,
    project_id: int | None = None,
    parent_id: int | None = None,
    validate_only: bool = False,
    template: Mapping[str, Any] | None = None,
    unmanaged: bool = False,
    external_experiment_id: str | None = None,
) -> CreatedExperiment:
    """Validate and store a new experiment (ACTIVE if ``activate``, else PAUSED); the owner
    needs a member role or more in the project's workspace (:mod:`stalwart.master.policy`).
    ``template``: a config template's settings, merged under the config. ``parent_id``: a
    fork; with no files of its own it gets the parent's model definition. ``unmanaged``: the
    SDK's detached mode (:mod:`stalwart.master.services.unmanaged`): always PAUSED, never
    checkpoint-collected by the master, found again by ``external_experiment_id``."""
    files = list(model_definition)
    archive = build_archive(files, max_bytes=settings.limits.max_model_definition_bytes)
    if parent_id is not None and not files:
        archive = _parent_archive(session, owner, parent_id)
    project = session.get(Project, project_id or 1)
    if project is None:
        raise NotFoundError(f"project {project_id} not found")
    policy.require_create_in_project(session, owner, project.id)
    workspace = session.get(Workspace, project.workspace_id)
    if project.archived or (workspace is not None and workspace.archived):
        raise FailedPreconditionError(
            f"project '{project.name}' is archived (or its workspace is) and takes no new "
            "experiments"
        )
    config, notices = defaulted_config(
        config_text,
        settings,
        archive=archive,
        template=template,
        workspace=workspace,
        unmanaged=unmanaged,
    )
    resources = cast(dict[str, Any], config.get("resources", {}))
    experiment = Experiment(
        name=str(config["name"]),
        description=config.get("description"),
        labels=list(config.get("labels") or []),
        state="ACTIVE" if activate and not unmanaged else "PAUSED",
        archived=False,
        project_id=project.id,
        owner_id=owner.id,
        original_config=config_text,
        config=config,
        model_definition=archive,
        searcher_type=str(config["searcher"]["name"]),
        resource_pool=str(resources.get("resource_pool") or "default"),
        job_id=str(uuid.uuid4()),
        parent_id=parent_id,
        start_time=utcnow(),
        unmanaged=unmanaged,
        external_experiment_id=external_experiment_id,
        checkpoints_collected=unmanaged,  # its storage is the script's: nothing to collect
    )
    require_pool_usable(session, experiment.resource_pool, project.workspace_id, "experiment")
    warm_start_checkpoint(session, config)  # the source trial / checkpoint must exist
    if validate_only:
        experiment.id = 0
        return CreatedExperiment(experiment, notices)
    session.add(experiment)
    session.commit()
    return CreatedExperiment(experiment, notices)
