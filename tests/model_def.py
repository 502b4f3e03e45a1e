"""Model-definition entries as the official client uploads them (``modelDefinition`` items)."""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["entry"]


def entry(path: str, content: bytes = b"x = 1\n", kind: int = 48) -> dict[str, Any]:
    """One file (``kind`` 48) or directory (53) of a model definition."""
    return {
        "path": path,
        "type": kind,
        "content": base64.b64encode(content).decode(),
        "mode": 0o100644,
        "mtime": "1700000000",
        "uid": 0,
        "gid": 0,
    }
