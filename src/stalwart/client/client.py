"""The SDK's entry point: :class:`Client`, one master and one user.

Usage::

    from stalwart.client import Client

    with Client() as client:  # STALWART_MASTER, DET_MASTER or http://localhost:8080
        exp = client.create_experiment(Path("const.yaml"), Path("."))
        print(exp.wait())  # COMPLETED
        exp.top_checkpoint().download(Path("best"))

Errors are :class:`~stalwart.errors.StalwartError` subclasses: the master's errors re-raised
as the same classes (NotFoundError, InvalidArgumentError, UnauthenticatedError, ...), with the
master's message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
import yaml

from stalwart._retry import RetryPolicy
from stalwart.client import jobs, template, tokens, usage
from stalwart.client import webhook as webhook_api
from stalwart.client.auth import DEFAULT_MASTER, TokenStore, canonical_url, client_env
from stalwart.client.checkpoint import Checkpoint
from stalwart.client.context import pack_context, wire_files
from stalwart.client.experiment import Experiment
from stalwart.client.groups import PoolBindings, UserGroups
from stalwart.client.models import (
    AgentTokenInfo,
    CreateExperimentResponse,
    GetAgentsResponse,
    GetAgentTokensResponse,
    GetCheckpointResponse,
    GetExperimentResponse,
    GetExperimentsResponse,
    GetMasterResponse,
    GetProjectResponse,
    GetTaskResponse,
    GetTasksResponse,
    GetTrialResponse,
    GetUsersResponse,
    GetWorkspaceResponse,
    GetWorkspacesResponse,
    MasterConfigResponse,
    MasterLogEntry,
    MasterLogsResponse,
    MeResponse,
    RevokeAgentTokenResponse,
    TaskLogsResponse,
    TaskSummary,
    UserResponse,
    V1Agent,
    V1Template,
    V1User,
)
from stalwart.client.registry import Model, model_path
from stalwart.client.session import SDK_RETRY, Progress, Session
from stalwart.client.task import TASK_KINDS, InteractiveTask, TaskKind, task_logs
from stalwart.client.template import TemplateConfig
from stalwart.client.trial import Trial
from stalwart.client.webhook import Webhook, WebhookDelivery
from stalwart.client.workspace import Project, Workspace, find_workspace
from stalwart.errors import ConfigError, InvalidArgumentError
from stalwart.master.api.models.model_registry import GetModelResponse, GetModelsResponse

__all__ = ["Client", "ExperimentConfig", "TaskConfig"]

ExperimentConfig = str | Path | Mapping[str, Any]
"""An experiment config: YAML text (``str``), a YAML file (``Path``) or a mapping."""

TaskConfig = str | Path | Mapping[str, Any]
"""A task config (Determined's command config: ``description``, ``resources``,
``environment``, ``idle_timeout``...): YAML text, a YAML file or a mapping."""

_TASK_TYPES: dict[str, TaskKind] = {f"TASK_TYPE_{kind.upper()}": kind for kind in TASK_KINDS}

_INVALID_CONFIG = "invalid experiment configuration: "


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _config_text(config: ExperimentConfig) -> tuple[str, str]:
    """``(YAML text, source name)``; a local check that it is a YAML mapping."""
    from stalwart.config.loader import parse_yaml

    if isinstance(config, Path):
        try:
            text = config.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read config file {config}: {exc.strerror}") from exc
        source = str(config)
    elif isinstance(config, str):
        text, source = config, "<config>"
    else:
        text, source = yaml.safe_dump(dict(config), sort_keys=False), "<config>"
    doc = parse_yaml(text, source)
    if not isinstance(doc.data, dict):
        raise ConfigError(source, ["<config>: must be a mapping of experiment settings"])
    return text, source


def _task_config(config: TaskConfig | None) -> dict[str, Any]:
    """A task config as a dict (a local check that it is a YAML mapping)."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    text, _ = _config_text(config)
    data = yaml.safe_load(text)
    return dict(data) if isinstance(data, dict) else {}


def _config_error(source: str, exc: InvalidArgumentError) -> ConfigError:
    """The master's "invalid experiment configuration: a; b" as a ConfigError of ``source``."""
    problems = exc.message.removeprefix(_INVALID_CONFIG).split("; ")
    return ConfigError(source, problems)


class Client:
    """A connection to one master as one user.

    ``master``: its URL (default ``STALWART_MASTER``, then ``DET_MASTER``, then
    ``http://localhost:8080``). ``user`` and ``password``: who to be (see
    :mod:`stalwart.client.session` for how the user and the credentials are chosen when
    omitted). ``config_dir``: where ``auth.json`` caches tokens. ``environ``: the environment
    to read instead of ``os.environ`` (tests). ``retry``: how long to ride out a master that
    is away, stopping or restarting (:data:`~stalwart.client.session.SDK_RETRY`: ten seconds;
    see :mod:`stalwart._retry`). Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        master: str | None = None,
        user: str | None = None,
        password: str | None = None,
        *,
        config_dir: Path | None = None,
        timeout: float = 30.0,
        environ: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy = SDK_RETRY,
    ) -> None:
        env = client_env(environ)
        self.master = canonical_url(master or env.master or DEFAULT_MASTER)
        store = TokenStore(config_dir=config_dir or env.config_dir)
        self._session = Session(
            self.master,
            user=user,
            password=password,
            env=env,
            store=store,
            timeout=timeout,
            transport=transport,
            retry=retry,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._session.close()

    @property
    def user(self) -> str:
        """Who requests are made as."""
        return self._session.user

    @property
    def token_store(self) -> TokenStore:
        return self._session.store

    @property
    def groups(self) -> UserGroups:
        """User groups and the workspace roles given to them (:mod:`stalwart.client.groups`)."""
        return UserGroups(self._session)

    @property
    def pool_bindings(self) -> PoolBindings:
        """Resource pools bound to workspaces (:mod:`stalwart.client.groups`)."""
        return PoolBindings(self._session)

    # -- users ---------------------------------------------------------------------------------

    def login(self, user: str, password: str = "") -> V1User:
        """Log in, cache the token and make ``user`` the master's active user."""
        return self._session.login(user, password, activate=True)

    def logout(self) -> None:
        """End the current user's session and forget its token."""
        self._session.logout()

    def whoami(self) -> V1User:
        """The user requests are made as."""
        return self._session.get("/api/v1/me", MeResponse).user

    def list_users(self) -> list[V1User]:
        """Every user, by id."""
        return self._session.get("/api/v1/users", GetUsersResponse).users

    def get_user(self, username: str) -> V1User:
        """One user by name (NotFoundError when there is none)."""
        return self._session.get(f"/api/v1/users/{username}/by-username", UserResponse).user

    def create_user(
        self,
        username: str,
        *,
        password: str = "",
        admin: bool = False,
        display_name: str | None = None,
    ) -> V1User:
        """Create a user (admins only; AlreadyExistsError when the name is taken)."""
        spec: dict[str, Any] = {"username": username, "admin": admin, "active": True}
        if display_name is not None:
            spec["displayName"] = display_name
        body = {"user": spec, "password": password, "isHashed": False}
        data = self._session.post("/api/v1/users", body)
        return UserResponse.model_validate(data).user

    def _user_id(self, username: str | None) -> int:
        user = self.get_user(username) if username else self.whoami()
        if user.id is None:  # pragma: no cover - the master always sends ids
            raise InvalidArgumentError(f"user {user.username} has no id")
        return user.id

    def change_password(self, password: str, username: str | None = None) -> None:
        """Set the password of ``username`` (default: the current user; others need admin).

        The current session stays valid; a cached token of the current user is kept.
        """
        user_id = self._user_id(username)
        body = {"password": password, "isHashed": False}
        self._session.post(f"/api/v1/users/{user_id}/password", body)

    def _set_active(self, username: str, active: bool) -> V1User:
        user_id = self._user_id(username)
        data = self._session.request("PATCH", f"/api/v1/users/{user_id}", body={"active": active})
        return UserResponse.model_validate(data).user

    def revoke_sessions(self, username: str) -> int:
        """End every session of ``username`` (admins, or users for themselves): all of the
        user's tokens stop working. How many sessions ended."""
        user_id = self._user_id(username)
        data = self._session.request("DELETE", f"/api/v1/users/{user_id}/sessions")
        return int((data or {}).get("revoked", 0))

    def activate_user(self, username: str) -> V1User:
        """Let ``username`` log in again (admins only)."""
        return self._set_active(username, True)

    def deactivate_user(self, username: str) -> V1User:
        """Stop ``username`` from logging in and end their sessions (admins only)."""
        return self._set_active(username, False)

    # -- access tokens, the job queue, historical usage -----------------------------------------

    def create_token(
        self,
        username: str | None = None,
        *,
        expiration_days: int | None = None,
        description: str | None = None,
    ) -> tuple[int, str]:
        """A new access token for ``username`` (default: the current user; others need
        admin); ``(token id, token)``. The token is shown only now. ``expiration_days``: -1
        for the longest lifespan, None for the master's default (30 days)."""
        made = tokens.create_token(
            self._session,
            self._user_id(username),
            lifespan=tokens.lifespan_of_days(expiration_days),
            description=description,
        )
        return made.token_id, made.token

    def list_tokens(
        self,
        username: str | None = None,
        *,
        token_ids: Sequence[int] = (),
        show_inactive: bool = False,
    ) -> list[tokens.TokenInfo]:
        """Access tokens: one's own (an admin's: everyone's, or ``username``'s)."""
        return tokens.list_tokens(
            self._session, username=username, token_ids=token_ids, show_inactive=show_inactive
        )

    def edit_token(self, token_id: int, description: str) -> tokens.TokenInfo:
        """Change an access token's description."""
        return tokens.edit_token(self._session, token_id, description=description)

    def revoke_token(self, token_id: int) -> tokens.TokenInfo:
        """Revoke an access token: it is refused from now on."""
        return tokens.edit_token(self._session, token_id, revoke=True)

    def login_with_token(self, token: str) -> V1User:
        """Act as the user of an access token from now on, and make them the active user."""
        return self._session.use_token(token, activate=True)

    def list_jobs(self, resource_pool: str | None = None) -> list[jobs.LimitedJob]:
        """The job queue, in the order the scheduler takes the jobs."""
        return jobs.list_jobs(self._session, resource_pool=resource_pool)

    def update_job(
        self,
        job_id: str,
        *,
        priority: int | None = None,
        weight: float | None = None,
        ahead_of: str | None = None,
        behind_of: str | None = None,
    ) -> None:
        """Change a job's priority, weight, or place ahead of / behind another job."""
        jobs.update_job(
            self._session,
            job_id,
            priority=priority,
            weight=weight,
            ahead_of=ahead_of,
            behind_of=behind_of,
        )

    def usage_raw(self, after: str, before: str) -> list[usage.RawEntry]:
        """Allocations that held slots between two RFC 3339 times (admins)."""
        return usage.raw(self._session, after, before)

    def usage_aggregated(
        self, start_date: str, end_date: str, *, monthly: bool = False
    ) -> list[usage.AggregatedEntry]:
        """Slot-seconds per day (or month) between two dates, inclusive (admins)."""
        return usage.aggregated(self._session, start_date, end_date, monthly=monthly)

    def usage_csv(self, after: str, before: str) -> str:
        """The allocations CSV between two RFC 3339 times, with image pull seconds (admins)."""
        return usage.allocations_csv(self._session, after, before)

    # -- experiments ---------------------------------------------------------------------------

    def create_experiment(
        self,
        config: ExperimentConfig,
        context_dir: Path | None = None,
        *,
        activate: bool = True,
        includes: Iterable[Path] = (),
        template: str | None = None,
        progress: Progress | None = None,
        project_id: int | None = None,
    ) -> Experiment:
        """Create an experiment from a config and a model definition directory (in project
        ``project_id``; default: 1, "Uncategorized").

        ``context_dir`` is packed as Determined's client does (``.detignore`` and
        ``.stalwartignore`` honoured; :mod:`stalwart.client.context`), plus each of
        ``includes``. ``activate=False`` creates it PAUSED. ``progress(sent, total)`` follows
        the upload. An invalid config raises ConfigError naming the config's source and each
        problem with its path and YAML line.
        """
        text, source = _config_text(config)
        files = wire_files(pack_context(context_dir, includes))
        body = {
            "activate": activate,
            "config": text,
            "modelDefinition": files,
            "parentId": None,
            "projectId": project_id,
            "template": template,
            "validateOnly": False,
        }
        try:
            created = self._session.upload(
                "/api/v1/experiments", body, CreateExperimentResponse, progress
            )
        except InvalidArgumentError as exc:
            if exc.message.startswith(_INVALID_CONFIG):
                raise _config_error(source, exc) from None
            raise
        experiment = Experiment(self._session, created.experiment)
        experiment.notices = list(created.notices)
        return experiment

    def continue_experiment(
        self, experiment_id: int, config: str | Path | Mapping[str, Any] | None = None
    ) -> Experiment:
        """Continue a finished single-trial experiment from its latest checkpoint, with
        ``config`` merged over its config (``det e continue``; see
        :meth:`Experiment.continue_`)."""
        return self.get_experiment(experiment_id).continue_(config)

    def get_experiment(self, experiment_id: int) -> Experiment:
        """One experiment (NotFoundError when there is none)."""
        path = f"/api/v1/experiments/{experiment_id}"
        return Experiment(self._session, self._session.get(path, GetExperimentResponse).experiment)

    def list_experiments(
        self,
        *,
        users: Sequence[str] | None = None,
        archived: bool | None = False,
        states: Sequence[str] = (),
        name: str | None = None,
        limit: int = 0,
    ) -> list[Experiment]:
        """Experiments by id, newest last.

        ``users``: only theirs (None: everyone's); ``archived``: False hides archived ones,
        None shows both; ``states``: only these (``COMPLETED``, ``ACTIVE``...); ``name``: a
        substring of the name; ``limit``: the newest N (0: all).
        """
        params: dict[str, Any] = {"sortBy": "SORT_BY_ID", "orderBy": "ORDER_BY_ASC"}
        if users:
            params["users"] = list(users)
        if archived is not None:
            params["archived"] = "true" if archived else "false"
        if states:
            params["states"] = [f"STATE_{s.removeprefix('STATE_')}" for s in states]
        if name:
            params["name"] = name
        if limit:
            params["offset"], params["limit"] = -limit, limit
        found = self._session.get("/api/v1/experiments", GetExperimentsResponse, params)
        return [Experiment(self._session, e) for e in found.experiments]

    # -- workspaces and projects --------------------------------------------------------------

    def create_workspace(self, name: str, **settings: Any) -> Workspace:
        """A new workspace (its creator becomes its admin); ``settings`` as
        :meth:`Workspace.edit`."""
        body = {"name": name} | {_camel(k): v for k, v in settings.items()}
        answer = self._session.post("/api/v1/workspaces", body)
        return Workspace(self._session, GetWorkspaceResponse.model_validate(answer).workspace)

    def get_workspace(self, name: str) -> Workspace:
        """The workspace called ``name`` (any case; NotFoundError when there is none)."""
        return Workspace(self._session, find_workspace(self._session, name))

    def list_workspaces(self) -> list[Workspace]:
        """Every workspace this user may see, by id."""
        found = self._session.get("/api/v1/workspaces", GetWorkspacesResponse).workspaces
        return [Workspace(self._session, w) for w in found]

    def get_project(self, project_id: int) -> Project:
        """One project by id (NotFoundError when there is none or it is not visible)."""
        path = f"/api/v1/projects/{project_id}"
        return Project(self._session, self._session.get(path, GetProjectResponse).project)

    def get_trial(self, trial_id: int) -> Trial:
        """One trial (NotFoundError when there is none)."""
        data = self._session.get(f"/api/v1/trials/{trial_id}", GetTrialResponse).trial
        return Trial(self._session, data)

    # -- model registry ------------------------------------------------------------------------

    def create_model(
        self,
        name: str,
        *,
        description: str = "",
        metadata: Mapping[str, Any] | None = None,
        labels: Sequence[str] = (),
        notes: str = "",
        workspace: str | None = None,
    ) -> Model:
        """A new model of the registry (in workspace ``workspace``, default Uncategorized)."""
        body: dict[str, Any] = {"name": name, "description": description, "notes": notes}
        body["metadata"], body["labels"] = dict(metadata or {}), list(labels)
        if workspace is not None:
            body["workspaceName"] = workspace
        answer = self._session.post("/api/v1/models", body)
        return Model(self._session, GetModelResponse.model_validate(answer).model)

    def get_model(self, name_or_id: str | int) -> Model:
        """One model by name or id (NotFoundError when none you may see has it)."""
        return Model(
            self._session, self._session.get(model_path(name_or_id), GetModelResponse).model
        )

    def list_models(
        self,
        *,
        name: str | None = None,
        labels: Sequence[str] = (),
        workspaces: Sequence[str] | None = None,
        archived: bool | None = None,
    ) -> list[Model]:
        """The models you may see, by name; ``name``: a part of it, ``labels``: any of them,
        ``workspaces``: only in these, ``archived``: only (un)archived ones."""
        params: dict[str, Any] = {"sortBy": "SORT_BY_NAME", "orderBy": "ORDER_BY_ASC"}
        if name:
            params["name"] = name
        if labels:
            params["labels"] = list(labels)
        if workspaces is not None:
            params["workspaceNames"] = list(workspaces)
        if archived is not None:
            params["archived"] = "true" if archived else "false"
        found = self._session.get("/api/v1/models", GetModelsResponse, params)
        return [Model(self._session, m) for m in found.models]

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """One checkpoint by UUID (NotFoundError when there is none)."""
        data = self._session.get(f"/api/v1/checkpoints/{uuid}", GetCheckpointResponse)
        return Checkpoint(data.checkpoint)

    # -- config templates ----------------------------------------------------------------------

    def set_template(
        self, name: str, config: TemplateConfig, *, workspace_id: int | None = None
    ) -> V1Template:
        """Create template ``name`` (in ``workspace_id``, default 1) or replace its settings
        (YAML text, a YAML file or a mapping); editors of its workspace only."""
        return template.set_template(self._session, name, config, workspace_id=workspace_id)

    def get_template(self, name: str) -> V1Template:
        """One template (NotFoundError when there is none you may read)."""
        return template.get_template(self._session, name)

    def list_templates(self, name: str | None = None) -> list[V1Template]:
        """The templates you may read, by name (``name``: a substring, any case)."""
        return template.list_templates(self._session, name)

    def remove_template(self, name: str) -> None:
        """Remove template ``name``; editors of its workspace only."""
        template.remove_template(self._session, name)

    # -- cluster -------------------------------------------------------------------------------

    def list_agents(self) -> list[V1Agent]:
        """The agents the master knows, with their slots."""
        return self._session.get("/api/v1/agents", GetAgentsResponse).agents

    def agent_tokens(self) -> list[AgentTokenInfo]:
        """Every agent's credential: enrolled, first used, revoked (admins only)."""
        return self._session.get("/api/v1/agents/tokens", GetAgentTokensResponse).agent_tokens

    def revoke_agent_token(
        self, agent_id: str, *, reenroll: bool = False
    ) -> RevokeAgentTokenResponse:
        """Revoke an agent's token (admins only): forbid the agent id (its token and the
        enrollment token are refused from its next sync on), or with ``reenroll`` let it enroll
        again with the enrollment token. NotFoundError when the id never enrolled."""
        path = f"/api/v1/agents/{quote(agent_id, safe='')}/token"
        params = {"reenroll": "true"} if reenroll else None
        data = self._session.request("DELETE", path, params=params)
        return RevokeAgentTokenResponse.model_validate(data or {})

    def list_tasks(self) -> dict[str, TaskSummary]:
        """Live allocations by allocation id (what the slots run)."""
        found = self._session.get("/api/v1/tasks", GetTasksResponse)
        return found.allocation_id_to_summary

    def prepull_plan(self) -> dict[str, list[str]]:
        """The master's pre-pull plan: pool -> images its nodes should hold ({} when off)."""
        plan = self._session.request("GET", "/api/v1/prepull") or {}
        pools = plan.get("pools") or {}
        return {str(name): [str(i) for i in pool.get("images", [])] for name, pool in pools.items()}

    def master_info(self) -> GetMasterResponse:
        """The master's version and identity."""
        return self._session.get("/api/v1/master", GetMasterResponse)

    def master_config(self) -> dict[str, Any]:
        """The master's effective settings (admins only; secrets removed)."""
        return self._session.get("/api/v1/master/config", MasterConfigResponse).config

    def master_logs(
        self, *, follow: bool = False, tail: int | None = None
    ) -> Iterator[MasterLogEntry]:
        """The master's own recent log records (its in-memory ring), oldest first.

        ``tail`` N: only the last N; ``follow``: then keep streaming new records until the
        iterator is closed or the master stops.
        """
        if tail is not None and tail < 1:
            raise InvalidArgumentError("tail must be at least 1")
        params: dict[str, Any] = {"follow": "true" if follow else "false"}
        if tail is not None:
            params["offset"] = -tail
        return (
            MasterLogsResponse.model_validate(item).log_entry
            for item in self._session.stream("/api/v1/master/logs", params, follow=follow)
        )

    # -- webhooks ------------------------------------------------------------------------------

    def list_webhooks(self) -> list[Webhook]:
        """The webhooks the user may manage (docs/webhooks.md)."""
        return webhook_api.list_webhooks(self._session)

    def create_webhook(
        self,
        url: str,
        *,
        name: str = "",
        slack: bool = False,
        workspace_id: int | None = None,
        specific: bool = False,
        states: Sequence[str] = (),
        log_regexes: Sequence[str] = (),
    ) -> Webhook:
        """Create a webhook posting to ``url`` when an experiment reaches one of ``states``
        (``COMPLETED``, ``ERROR``...) or a task logs a line matching one of ``log_regexes``.
        ``workspace_id`` None makes it global (admins); ``specific``: only experiments that
        name it in ``integrations.webhooks``; ``slack``: post Slack messages."""
        return webhook_api.create_webhook(
            self._session,
            url,
            name=name,
            slack=slack,
            workspace_id=workspace_id,
            specific=specific,
            states=states,
            log_regexes=log_regexes,
        )

    def delete_webhook(self, webhook_id: int) -> None:
        """Delete a webhook."""
        webhook_api.delete_webhook(self._session, webhook_id)

    def test_webhook(self, webhook_id: int) -> None:
        """Post a test event to the webhook now (FailedPreconditionError when refused)."""
        webhook_api.test_webhook(self._session, webhook_id)

    def webhook_deliveries(self, webhook_id: int, *, limit: int = 50) -> list[WebhookDelivery]:
        """The webhook's latest events and how their delivery went, newest first."""
        return webhook_api.list_deliveries(self._session, webhook_id, limit=limit)

    # -- interactive tasks ---------------------------------------------------------------------

    def _launch(
        self,
        kind: TaskKind,
        config: TaskConfig | None,
        context_dir: Path | None,
        includes: Iterable[Path],
        *,
        template: str | None,
        extra: Mapping[str, Any] | None = None,
        entrypoint: str | Sequence[str] | None = None,
    ) -> InteractiveTask:
        spec = _task_config(config)
        if entrypoint is not None:
            spec["entrypoint"] = [entrypoint] if isinstance(entrypoint, str) else list(entrypoint)
        body: dict[str, Any] = {"config": spec, "templateName": template}
        if context_dir is not None or includes:
            body["files"] = wire_files(pack_context(context_dir, includes))
        body.update(extra or {})
        answer = self._session.request("POST", f"/api/v1/{kind}s", body=body)
        return InteractiveTask.from_answer(self._session, kind, answer)

    def launch_command(
        self,
        entrypoint: str | Sequence[str],
        config: TaskConfig | None = None,
        context_dir: Path | None = None,
        *,
        includes: Iterable[Path] = (),
        template: str | None = None,
    ) -> InteractiveTask:
        """Run a command on the cluster (``det cmd run``).

        ``entrypoint``: a shell line (``"make test | tee out"``, run under ``sh -c``) or an argv
        list. ``context_dir`` (and ``includes``) are uploaded as Determined's client does
        (``.detignore`` / ``.stalwartignore`` honoured) and become the working directory.
        """
        return self._launch(
            "command", config, context_dir, includes, template=template, entrypoint=entrypoint
        )

    def launch_notebook(
        self,
        config: TaskConfig | None = None,
        context_dir: Path | None = None,
        *,
        includes: Iterable[Path] = (),
        template: str | None = None,
    ) -> InteractiveTask:
        """Start a JupyterLab notebook; :meth:`InteractiveTask.wait_ready`, then open
        :attr:`InteractiveTask.url`."""
        return self._launch("notebook", config, context_dir, includes, template=template)

    def launch_shell(
        self,
        config: TaskConfig | None = None,
        context_dir: Path | None = None,
        *,
        includes: Iterable[Path] = (),
        template: str | None = None,
    ) -> InteractiveTask:
        """Start a shell task (an sshd of its own, reached through the master's tunnel with
        the key in ``data.private_key``, as ``data.agent_user_group["user"]``)."""
        return self._launch("shell", config, context_dir, includes, template=template)

    def launch_tensorboard(
        self,
        experiment_ids: Sequence[int] = (),
        trial_ids: Sequence[int] = (),
        config: TaskConfig | None = None,
        *,
        template: str | None = None,
    ) -> InteractiveTask:
        """Start a TensorBoard of these experiments' trials and these trials (at least one)."""
        if not experiment_ids and not trial_ids:
            raise InvalidArgumentError("a TensorBoard needs experiments or trials to show")
        extra = {"experimentIds": list(experiment_ids), "trialIds": list(trial_ids)}
        return self._launch("tensorboard", config, None, (), template=template, extra=extra)

    def list_interactive(
        self, kind: TaskKind | None = None, *, users: Sequence[str] | None = None
    ) -> list[InteractiveTask]:
        """Commands, notebooks, shells and TensorBoards the caller may see (``kind``: only
        those; ``users``: only theirs), each kind by start time, in that order of kinds."""
        params: dict[str, Any] = {"users": list(users)} if users else {}
        found: list[InteractiveTask] = []
        for each in (kind,) if kind is not None else TASK_KINDS:
            answer = self._session.request("GET", f"/api/v1/{each}s", params=params) or {}
            for item in answer.get(f"{each}s") or []:
                found.append(InteractiveTask.from_answer(self._session, each, {each: item}))
        return found

    def get_interactive(self, task_id: str, kind: TaskKind | None = None) -> InteractiveTask:
        """One command, notebook, shell or TensorBoard (its kind is asked of the master when
        not given; NotFoundError when there is none, InvalidArgumentError for a trial)."""
        if kind is None:
            info = self._session.get(f"/api/v1/tasks/{task_id}", GetTaskResponse).task
            found = _TASK_TYPES.get(info.task_type)
            if found is None:
                what = info.task_type.removeprefix("TASK_TYPE_").lower()
                raise InvalidArgumentError(
                    f"task {task_id} is a {what}, not a command, notebook, shell or TensorBoard"
                )
            kind = found
        answer = self._session.request("GET", f"/api/v1/{kind}s/{task_id}")
        return InteractiveTask.from_answer(self._session, kind, answer)

    def kill_task(self, task_id: str) -> None:
        """Stop any interactive or generic task by id (``det task kill``)."""
        self._session.post(f"/api/v1/tasks/{task_id}/kill")

    def task_logs(
        self,
        task_id: str,
        *,
        follow: bool = False,
        head: int | None = None,
        tail: int | None = None,
    ) -> Iterator[TaskLogsResponse]:
        """Any task's log lines, oldest first (see :func:`stalwart.client.task.task_logs`)."""
        return task_logs(self._session, task_id, follow=follow, head=head, tail=tail)
