"""Stalwart: an open-source deep-learning training platform.

Importing ``stalwart`` is what training code does (``import stalwart as det``), so this package
and its harness parts must import without the master's dependencies.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
