"""``stalwart agent tokens`` and ``stalwart agent revoke``: agents' own tokens (admins only).

Each agent enrolls with the cluster's agent token and gets a token of its own
(docs/security.md). ``tokens [--json]`` lists them (agent id, enrolled, first used, revoked;
never a token). ``revoke AGENT_ID`` forbids the agent id: its token and the enrollment token are
refused from its next sync on, so the agent stops. ``revoke AGENT_ID --reenroll`` instead lets
the id enroll again (a lost ``<agent home>/agent_token``, a forbidden id allowed back).
"""

from __future__ import annotations

from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table

__all__ = ["list_agent_tokens", "revoke_agent_token"]


def list_agent_tokens(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the agents' own tokens: enrolled, first used, revoked (admins only)."""
    tokens = client().agent_tokens()
    if as_json:
        print_json(tokens)
        return
    grid = table("Agent", "Enrolled", "First used", "Revoked")
    for info in tokens:
        grid.add_row(
            info.agent_id,
            fmt_time(info.created_at, compact=True),
            fmt_time(info.confirmed_at, compact=True) or "not yet",
            fmt_time(info.revoked_at, compact=True) or "no",
        )
    out().print(grid)


def revoke_agent_token(
    agent_id: Annotated[str, typer.Argument(help="The agent id.")],
    reenroll: Annotated[
        bool,
        typer.Option(
            "--reenroll",
            help="Let the agent id enroll again with the cluster's agent token, instead of "
            "forbidding it.",
        ),
    ] = False,
) -> None:
    """Revoke an agent's token (admins only): the agent is refused from its next sync on."""
    client().revoke_agent_token(agent_id, reenroll=reenroll)
    if reenroll:
        message = (
            f"Revoked the token of agent {agent_id}; the id may enroll again with the "
            "cluster's agent token."
        )
    else:
        message = (
            f"Revoked the token of agent {agent_id}; the id is refused until "
            f"`stalwart agent revoke {agent_id} --reenroll`."
        )
    out().print(message, markup=False)
