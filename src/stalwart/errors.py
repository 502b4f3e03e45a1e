"""Stalwart's error tree.

Every error a user can see derives from :class:`StalwartError` and carries a stable ``code``.
One place (the CLI's catch point, later the API's exception handler) turns these into a one-line
message or a JSON body; nothing else formats errors for people.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "ConfigError",
    "EnvironmentResolutionError",
    "EnvsBumpError",
    "FailedPreconditionError",
    "ForbiddenError",
    "FrameworkConflictError",
    "ImageSpecError",
    "InvalidArgumentError",
    "InvalidTransitionError",
    "ManifestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "StaleImageReferencesError",
    "StalwartError",
    "StoredConfigError",
    "TooManyRequestsError",
    "UnauthenticatedError",
    "UnavailableError",
]


class StalwartError(Exception):
    """Base of all user-facing errors.

    ``code`` is stable across releases (clients match on it); ``hint`` says what to do next.
    """

    code = "stalwart_error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


class ConfigError(StalwartError):
    """A configuration file or document is invalid.

    ``problems`` holds one line per problem, each naming its path (and YAML line where known).
    """

    code = "invalid_config"

    def __init__(self, source: str, problems: list[str]) -> None:
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{source}: {count} {noun}:\n" + "\n".join(problems))
        self.source = source
        self.problems = problems


class EnvironmentResolutionError(StalwartError):
    """A task image cannot be chosen for an experiment."""

    code = "image_resolution_failed"


class FrameworkConflictError(EnvironmentResolutionError):
    """The model imports both PyTorch and TensorFlow and no image is pinned."""

    code = "framework_conflict"


class ImageSpecError(EnvironmentResolutionError, ValueError):
    """An ``image`` value has the wrong shape (an unknown device key, a non-string image).

    Also a :class:`ValueError`, so a pydantic validator that calls the normalizer reports it as
    an ordinary validation error.
    """

    code = "invalid_image_spec"


class ManifestError(ConfigError):
    """The task-image manifest (``stalwart/environments/manifest.yaml``) is malformed."""

    code = "invalid_manifest"


class EnvsBumpError(StalwartError):
    """``stalwart envs bump`` cannot run: a bad tag, or no manifest in the repository."""

    code = "envs_bump_failed"


class StaleImageReferencesError(StalwartError):
    """``stalwart envs check`` found image references that disagree with the manifest."""

    code = "stale_image_references"


class StoredConfigError(StalwartError):
    """An experiment's stored config no longer validates against the config models (HTTP 500).

    Stored configs are validated when they are created and edited, so this means the database
    was changed by hand or a Stalwart upgrade tightened a model: the server's data is at fault,
    not the request. ``problems`` holds one line per problem, each naming its path.
    """

    code = "invalid_stored_config"

    def __init__(self, experiment_id: int | None, problems: list[str]) -> None:
        super().__init__(
            f"the stored config of experiment {experiment_id} no longer validates: "
            + "; ".join(problems),
            hint="fix the experiment's stored config, or run the Stalwart version that created it",
        )
        self.experiment_id = experiment_id
        self.problems = problems


class NotFoundError(StalwartError):
    """The thing asked for does not exist (HTTP 404)."""

    code = "not_found"


class UnauthenticatedError(StalwartError):
    """No valid credentials were given (HTTP 401)."""

    code = "unauthenticated"


class ForbiddenError(StalwartError):
    """The credentials are valid but not allowed to do this (HTTP 403)."""

    code = "permission_denied"


class InvalidArgumentError(StalwartError):
    """A request is malformed or names impossible values (HTTP 400)."""

    code = "invalid_argument"


class FailedPreconditionError(StalwartError):
    """The request is valid but the system is not in a state to do it (HTTP 400)."""

    code = "failed_precondition"


class InvalidTransitionError(FailedPreconditionError):
    """A state change that the state machine does not allow."""

    code = "invalid_transition"


class AlreadyExistsError(StalwartError):
    """Something with that name already exists (HTTP 409)."""

    code = "already_exists"


class PayloadTooLargeError(StalwartError):
    """A request is over a configured size limit (HTTP 413)."""

    code = "payload_too_large"


class TooManyRequestsError(StalwartError):
    """Too many attempts in a short time (HTTP 429); ``retry_after`` says how many seconds to
    wait before trying again (sent as the ``Retry-After`` header)."""

    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after = max(1, retry_after)


class UnavailableError(StalwartError):
    """Something the request needs does not answer now (a task's service still starting, a
    node out of reach); the same request may succeed in a moment (HTTP 503)."""

    code = "unavailable"
