"""Secrets never leave the master: what counts as one, and how it is hidden.

A secret is the value of a key in :data:`SECRET_KEYS` anywhere in a config (``registry_auth``'s
``password``, checkpoint storage's ``access_key``, ``secret_key``, ``connection_string``,
``account_key``, ``credentials``..., tokens), or the value of an environment variable in
``environment.environment_variables`` whose name looks secret (:data:`SECRET_ENV_NAME`: ``KEY``,
``SECRET``, ``TOKEN``, ``PASSWORD``, ``CREDENTIAL``...). Every API answer that carries a config
(experiments, checkpoints' training metadata, the master's config) goes through
:func:`redact_config` or :func:`redact_yaml`; log lines served for a trial or task go through
:func:`redact_text` with the secrets of its experiment, and the model definition served to users
(``GET /api/v1/experiments/{id}/model_def``, where the submitted config file usually rides
along) through :func:`redact_archive`. Values become :data:`MASK`.

Only answers are redacted: the database keeps the real values and tasks receive them (their
``DET_EXPERIMENT_CONFIG`` and checkpoint storage, the agent's task spec).
"""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

__all__ = [
    "MASK",
    "SECRET_ENV_NAME",
    "SECRET_KEYS",
    "collect_secrets",
    "redact_archive",
    "redact_config",
    "redact_text",
    "redact_yaml",
]

MASK = "********"
"""What a secret value is replaced with."""

SECRET_KEYS = frozenset(
    {
        "password",
        "access_key",
        "secret_key",
        "session_token",
        "connection_string",
        "account_key",
        "sas_token",
        "credentials",
        "token",
        "auth",
        "identitytoken",
        "registrytoken",
        "agent_token",
        "initial_user_password",
        "signing_key",
        "api_key",
        "private_key",
        "client_secret",
    }
)
"""Keys (compared without case, ``-`` read as ``_``) whose values are secrets."""

SECRET_ENV_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
"""Environment variable names whose values are secrets."""


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS


def _secret_env(entry: object) -> tuple[str, str] | None:
    """``(name, value)`` of a ``NAME=value`` entry whose name looks secret."""
    if not isinstance(entry, str) or "=" not in entry:
        return None
    name, value = entry.split("=", 1)
    return (name, value) if SECRET_ENV_NAME.search(name) and value else None


def _has_value(value: Any) -> bool:
    return value is not None and value != "" and value != {} and value != []


def _walk(value: Any, found: list[str] | None, *, env: bool = False) -> Any:
    """``value`` with secrets masked; their string values appended to ``found``."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if _is_secret_key(key) and _has_value(item):
                if found is not None:
                    found.extend(_strings(item))
                out[key] = MASK
            else:
                out[key] = _walk(item, found, env=env or key == "environment_variables")
        return out
    if isinstance(value, list):
        return [_walk(item, found, env=env) for item in value]
    if env and (pair := _secret_env(value)) is not None:
        if found is not None:
            found.append(pair[1])
        return f"{pair[0]}={MASK}"
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [str(value)] if value is not None else []


def redact_config(config: Any) -> Any:
    """A copy of ``config`` with every secret masked (the input is not changed)."""
    return _walk(config, None)


def collect_secrets(config: Any) -> list[str]:
    """The secret strings of ``config``, longest first (for :func:`redact_text`)."""
    found: list[str] = []
    _walk(config, found)
    return sorted({s for s in found if s}, key=len, reverse=True)


_MAY_HOLD_SECRET = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL|AUTH|CONNECTION|\\", re.I)
"""Text no secret key or secret-looking variable name can hide in without matching (every
name in :data:`SECRET_KEYS` and :data:`SECRET_ENV_NAME` contains one of these words; a
backslash may be a YAML escape spelling one, so it counts too)."""

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it


def redact_yaml(text: str) -> str:
    """``text`` (a YAML config as submitted) unchanged when it holds no secret; otherwise the
    same config with its secrets masked, dumped again as YAML (comments are lost).

    Most configs hold none: text without any word a secret name contains is returned without
    parsing (the experiment list answers this for every row it returns).
    """
    if not _MAY_HOLD_SECRET.search(text):
        return text
    try:
        parsed = yaml.load(text, Loader=_Loader)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.YAMLError:
        return text
    if not collect_secrets(parsed):
        return text
    dumped: str = yaml.safe_dump(redact_config(parsed), sort_keys=False)
    return dumped


def redact_archive(blob: bytes, secrets: Sequence[str]) -> bytes:
    """A model-definition ``.tar.gz`` with every occurrence of each secret in its files
    replaced by :data:`MASK` (the submitted config file usually rides along in it); ``blob``
    itself when there is no secret or no file holds one."""
    needles = [s.encode() for s in secrets if s]
    if not needles or not blob:
        return blob
    out = io.BytesIO()
    changed = False
    with (
        tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as source,
        tarfile.open(fileobj=out, mode="w:gz", compresslevel=6) as target,
    ):
        for member in source.getmembers():
            reader = source.extractfile(member) if member.isfile() else None
            if reader is None:
                target.addfile(member)
                continue
            content = reader.read()
            for needle in needles:
                if needle in content:
                    content = content.replace(needle, MASK.encode())
                    changed = True
            member.size = len(content)
            target.addfile(member, io.BytesIO(content))
    return out.getvalue() if changed else blob


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by :data:`MASK`."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text
