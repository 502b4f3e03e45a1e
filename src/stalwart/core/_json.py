"""Turning user values (metrics, checkpoint metadata) into wire JSON.

Contract:

- :func:`jsonable` returns a deep copy made only of ``dict``/``list``/``str``/``int``/``float``/
  ``bool``/``None``, so a value queued for a background thread cannot change afterwards.
- Non-finite floats become the wire strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (what
  Determined's ``json_encode`` sends and the master stores).
- Scalars of array libraries (numpy, torch, jax: anything with ``.item()``) become plain numbers,
  their arrays (``.tolist()``) plain lists; nothing here imports those libraries.
- Anything else raises :class:`TypeError` naming where the value was found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps", "jsonable"]


def _float(value: float) -> float | str:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def jsonable(value: Any, where: str = "value") -> Any:
    """A JSON-safe deep copy of ``value`` (see the module contract); ``where`` names it in
    errors, e.g. ``"metrics['loss']"``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a key {key!r} that is not a string")
            out[key] = jsonable(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, list | tuple):
        return [jsonable(item, f"{where}[{i}]") for i, item in enumerate(value)]
    item = getattr(value, "item", None)
    size = getattr(value, "size", 1)
    if callable(item) and (size == 1 or callable(size)):
        try:
            return jsonable(item(), where)
        except (TypeError, ValueError, RuntimeError):  # not a one-element array
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return jsonable(tolist(), where)
    raise TypeError(
        f"{where} is a {type(value).__name__}, which is not JSON (use numbers, strings, "
        "booleans, None, lists or dicts)"
    )


def dumps(value: Any) -> bytes:
    """Compact JSON bytes of an already :func:`jsonable` value (NaN is refused)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
