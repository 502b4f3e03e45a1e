"""``log_policies`` and ``retention_policy``: what to do about a trial's logs.

Contract:

- A log policy is ``{name, pattern, action}`` (Determined 0.37+). ``action`` is
  ``cancel_retries`` or ``exclude_node``; the pre-0.37 form ``action: {type: <action>}`` is
  accepted and normalized to the plain string, as Determined does. A policy without ``name`` is
  a legacy policy; it matches and acts but puts no label on the trial.
- Names are unique within one list (Determined's rule).
- :data:`DEFAULT_LOG_POLICIES` are Determined's defaults, which label CUDA out-of-memory and
  uncorrectable ECC errors without acting on them. They are merged under the experiment's
  policies by name (:mod:`stalwart.config.merge`): a policy with the same ``name`` replaces a
  default, one with that name and no ``pattern`` switches it off, and ``log_policies: []`` turns
  all defaults off.
- ``checkpoint_policy`` is a top-level enum, modelled with the experiment config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from stalwart.config.base import ConfigModel

__all__ = [
    "DEFAULT_LOG_POLICIES",
    "LOG_ACTIONS",
    "LogAction",
    "LogPolicies",
    "LogPolicy",
    "RetentionPolicyConfig",
]

LOG_ACTIONS = ("cancel_retries", "exclude_node")
"""The actions a log policy can take."""


def _unwrap_legacy_action(value: Any) -> Any:
    """``{type: cancel_retries}`` (before Determined 0.37) -> ``cancel_retries``."""
    if isinstance(value, Mapping):
        if set(value) != {"type"}:
            raise PydanticCustomError(
                "log_action_legacy",
                "a log action is cancel_retries or exclude_node, or in the legacy form a map "
                "with only the key type",
            )
        return value["type"]
    return value


_ACTION_ENUM = {"type": "string", "enum": list(LOG_ACTIONS)}

LogAction = Annotated[
    Literal["cancel_retries", "exclude_node"],
    BeforeValidator(_unwrap_legacy_action),
    WithJsonSchema(
        {
            "anyOf": [
                _ACTION_ENUM,
                {
                    "type": "object",
                    "properties": {"type": _ACTION_ENUM},
                    "required": ["type"],
                    "additionalProperties": False,
                    "description": "Legacy form (before Determined 0.37).",
                },
            ]
        },
        mode="validation",
    ),
]
"""A log policy action, also accepted in the legacy ``{type: <action>}`` form."""


class LogPolicy(ConfigModel):
    """A regular expression matched against every log line of a trial, and what a match does."""

    name: str | None = Field(
        default=None,
        description="Label shown on the trial when the pattern matches; policies of several "
        "layers merge by name. Unset only in the legacy (pre-0.37) format.",
    )
    pattern: str | None = Field(
        default=None,
        description="Regular expression (RE2 syntax, as in Determined) matched against each log "
        "line. Unset disables the policy of the same name from a lower layer.",
    )
    action: LogAction | None = Field(
        default=None,
        description="`cancel_retries`: do not restart the trial after a failure once a line "
        "matched. `exclude_node`: restart it on other nodes than the one that logged the line. "
        "Unset: label only.",
    )


def _unique_names(policies: list[LogPolicy]) -> list[LogPolicy]:
    seen: set[str] = set()
    for policy in policies:
        if policy.name is None:
            continue
        if policy.name in seen:
            raise PydanticCustomError(
                "log_policy_duplicate",
                "log_policies have the name '{name}' more than once",
                {"name": policy.name},
            )
        seen.add(policy.name)
    return policies


LogPolicies = Annotated[list[LogPolicy], AfterValidator(_unique_names)]
"""A list of log policies whose names are unique."""

DEFAULT_LOG_POLICIES: tuple[LogPolicy, ...] = (
    LogPolicy(name="CUDA OOM", pattern=".*CUDA out of memory.*"),
    LogPolicy(name="ECC Error", pattern=".*uncorrectable ECC error encountered.*"),
)
"""Determined's default log policies: label, do not act (merged under the user's by name)."""


class RetentionPolicyConfig(ConfigModel):
    """How long the logs of the experiment's trials are kept."""

    log_retention_days: int | None = Field(
        default=None,
        ge=-1,
        le=32767,
        description="Days to keep trial logs after the trial ends; -1 keeps them forever, 0 "
        "deletes them at the next cleanup. Unset uses the cluster's setting.",
    )
