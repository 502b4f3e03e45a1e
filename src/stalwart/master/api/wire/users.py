"""Wire form of a user (the models are in ``api.models.users``)."""

from __future__ import annotations

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.users import AgentUserGroup, V1User
from stalwart.master.db.tables import User

__all__ = ["user_to_wire"]


def user_to_wire(user: User) -> V1User:
    """The wire form of a user row."""
    group = None
    if any(v is not None for v in (user.agent_uid, user.agent_gid, user.agent_user)):
        group = AgentUserGroup(
            agent_uid=user.agent_uid,
            agent_gid=user.agent_gid,
            agent_user=user.agent_user,
            agent_group=user.agent_group,
        )
    return V1User(
        id=user.id,
        username=user.username,
        admin=user.admin,
        active=user.active,
        display_name=user.display_name,
        remote=user.remote,
        agent_user_group=group,
        modified_at=wire_time(user.modified_at),
        last_auth_at=wire_time(user.last_auth_at),
    )
