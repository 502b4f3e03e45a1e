"""The typed view of an experiment's stored config, parsed once and cached.

``Experiment.config`` holds the fully defaulted config as plain JSON (the API answers
Determined's wire format from it as is). Master code that *reads* settings from it goes through
:func:`typed_config` (or :func:`typed_config_of` when it selected the column without the row)
and gets the validated, frozen :class:`~stalwart.config.ExperimentConfig`.

Contract:

- **Parsed once.** The first read of an experiment validates its stored config; later reads of
  the same stored config return the very same object. Entries are keyed by experiment id and
  checked against a fingerprint of the stored JSON (a BLAKE2 digest of its ``json.dumps``), so a
  config edited anywhere (``experiments.patch_experiment``, a test, another master sharing the
  database, an in-memory change to the dict) is parsed again and never served stale. Computing
  the fingerprint is far cheaper than validating.
- **Bounded.** At most :data:`CACHE_SIZE` experiments are kept, least recently used evicted.
- **Thread-safe.** The cluster loop thread and API worker threads share the cache; the lock is
  held only for the dictionary operations, never while validating.
- **Plain validation.** Stored configs are the completed config that creation validated (and
  patches change only fields whose bounds they check), so this runs the model's validation
  only, not the cross-field checks of :func:`stalwart.config.validate_experiment`.
- **Failure.** A stored config that no longer validates (the database edited by hand, or a
  Stalwart upgrade that tightened a model) raises :class:`~stalwart.errors.StoredConfigError`
  (HTTP 500, one line per problem). There is no fallback to the raw dict: callers never act on
  a config the models refuse. Failures are not cached.
- **Read only.** The model is frozen, but free-form parts (``data``, ``hyperparameters``,
  ``environment.pod_spec``...) are plain dicts shared by every caller: never mutate them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from stalwart.config import ExperimentConfig
from stalwart.config.validation import problems_from_error, render_problems
from stalwart.errors import StoredConfigError
from stalwart.master.db.tables import Experiment

__all__ = ["CACHE_SIZE", "clear_cache", "typed_config", "typed_config_of"]

CACHE_SIZE = 4096
"""Experiments whose typed config is kept (least recently used evicted)."""

_lock = threading.Lock()
_cache: OrderedDict[int, tuple[bytes, ExperimentConfig]] = OrderedDict()


def _fingerprint(config: Mapping[str, Any] | None) -> bytes:
    text = json.dumps(config, separators=(",", ":"), default=repr)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _validate(experiment_id: int | None, config: Mapping[str, Any] | None) -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(config)
    except ValidationError as exc:
        problems = render_problems(problems_from_error(exc, ExperimentConfig, config))
        raise StoredConfigError(experiment_id, problems) from None


def typed_config(experiment: Experiment) -> ExperimentConfig:
    """The experiment's stored config, validated (cached; see the module docstring).

    Raises StoredConfigError when the stored config no longer validates.
    """
    return typed_config_of(experiment.id, experiment.config)


def typed_config_of(
    experiment_id: int | None, config: Mapping[str, Any] | None
) -> ExperimentConfig:
    """The typed form of ``config``, the stored config of experiment ``experiment_id``.

    For code that selected the column without the row. ``experiment_id`` None (an experiment
    not stored yet) validates without caching. Raises StoredConfigError when ``config`` does
    not validate.
    """
    if experiment_id is None:
        return _validate(None, config)
    fingerprint = _fingerprint(config)
    with _lock:
        entry = _cache.get(experiment_id)
        if entry is not None and entry[0] == fingerprint:
            _cache.move_to_end(experiment_id)
            return entry[1]
    typed = _validate(experiment_id, config)
    with _lock:
        entry = _cache.get(experiment_id)
        if entry is not None and entry[0] == fingerprint:
            # Another thread parsed the same config meanwhile: keep one object per config.
            _cache.move_to_end(experiment_id)
            return entry[1]
        _cache[experiment_id] = (fingerprint, typed)
        _cache.move_to_end(experiment_id)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return typed


def clear_cache() -> None:
    """Forget every cached config (tests; never needed for correctness)."""
    with _lock:
        _cache.clear()
