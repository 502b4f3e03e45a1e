"""The web UI's per-user settings (Determined's ``user_web_settings``): opaque text values
under a storage path and a key, each user's own.

Writing a setting with an empty value removes it (Determined's rule); reset removes them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError
from stalwart.master.db.tables import UserWebSetting

__all__ = ["Setting", "get_settings", "put_settings", "reset_settings"]

MAX_KEY = 255


@dataclass(frozen=True)
class Setting:
    """One setting: ``storage_path`` and ``key`` name it."""

    key: str
    value: str
    storage_path: str = ""


def get_settings(session: Session, user_id: int) -> list[Setting]:
    """The user's settings, by storage path and key."""
    rows = session.scalars(
        select(UserWebSetting)
        .where(UserWebSetting.user_id == user_id)
        .order_by(UserWebSetting.storage_path, UserWebSetting.key)
    )
    return [Setting(r.key, r.value, r.storage_path) for r in rows]


def put_settings(session: Session, user_id: int, settings: Iterable[Setting]) -> None:
    """Store each setting (an empty value removes it) in one transaction; 400 (nothing
    stored) for an empty key, or a key or storage path over 255 characters."""
    for s in settings:
        if not s.key or len(s.key) > MAX_KEY or len(s.storage_path) > MAX_KEY:
            raise InvalidArgumentError(
                f"a setting needs a key of 1 to {MAX_KEY} characters and a storage path of at "
                f"most {MAX_KEY} (got key {s.key[:40]!r}, storage path {s.storage_path[:40]!r})"
            )
        row = session.get(UserWebSetting, (user_id, s.storage_path, s.key))
        if not s.value:
            if row is not None:
                session.delete(row)
        elif row is None:
            session.add(
                UserWebSetting(
                    user_id=user_id, storage_path=s.storage_path, key=s.key, value=s.value
                )
            )
        else:
            row.value = s.value
        session.flush()
    session.commit()


def reset_settings(session: Session, user_id: int) -> None:
    """Remove all of the user's settings."""
    session.execute(delete(UserWebSetting).where(UserWebSetting.user_id == user_id))
    session.commit()
