"""What the storage tests do when a server they need cannot be had: skip, or fail under CI=true.

Every store the contract runs on is a real server on a loopback port (moto for S3,
gcp-storage-emulator for GCS, Azurite for Azure Blob); under ``CI=true`` a missing one is a
failure, never a skip, so a green CI run means every store was tested.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under CI=true (where every service must be there)."""
    if in_ci():
        pytest.fail(f"{reason} (required under CI=true)", pytrace=False)
    pytest.skip(reason)


def require_module(name: str, why: str) -> ModuleType:
    """``import name``, or :func:`unavailable` naming the dev extra that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"{why} needs {name} ({exc}; pip install -e '.[dev]')")
