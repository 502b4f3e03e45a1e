"""The agent daemon (``stalwart agent``): slot detection, container runners, log shipping and
the sync loop with the master. See ``docs/contributing/agent.md``.

Nothing is imported here: the master imports :mod:`stalwart.agent.protocol` and must not pull in
the agent's modules with it.
"""

from __future__ import annotations

__all__: list[str] = []
