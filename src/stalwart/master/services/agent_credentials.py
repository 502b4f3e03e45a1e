"""Agents' credentials: the cluster's enrollment token and each agent's own token.

The cluster's agent token (``cluster.agent_token``, or the one the master generates into
``<home>/agent_token``) only **enrolls**: an agent that syncs with it under an agent id without
a credential gets a token of its own (:func:`enroll`), which it presents from then on. Rules of
:func:`authenticate`, for a sync of agent ``A`` presenting token ``T``:

- ``A`` revoked by an admin (``revoked_at`` set): refused, whatever ``T``;
- ``T`` is ``A``'s own token: accepted (the first such sync confirms the credential);
- ``T`` is the enrollment token and ``A`` has no credential, or one never used yet
  (unconfirmed: the answer carrying it may have been lost): ``A`` is (re-)enrolled;
- ``T`` is the enrollment token and ``A`` holds a confirmed credential: refused, saying where the
  agent's own token is and how an admin lets it enroll again;
- anything else (another agent's token, a wrong one): refused.

Refusals are :class:`~stalwart.errors.UnauthenticatedError` (401). Token comparisons take
constant time. There is no cache: every sync reads ``A``'s row (one primary-key read), so a
revocation (:func:`revoke`) holds from the very next sync, through every master sharing the
database.

Admins :func:`revoke` a credential either to **forbid** the id (``revoked_at`` set: its token
and the enrollment token are both refused) or to let it **re-enroll** (the row is deleted).

Functions here read and write rows; :func:`enroll`, :func:`confirm` and :func:`revoke` commit.
Nothing talks to the network.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError, UnauthenticatedError
from stalwart.master.db.tables import AgentCredential, utcnow

__all__ = [
    "MAX_AGENT_ID",
    "Verdict",
    "authenticate",
    "confirm",
    "enroll",
    "hash_token",
    "list_credentials",
    "revoke",
    "still_valid",
]

MAX_AGENT_ID = 255
"""Longest agent id (the ``agents`` and ``agent_credentials`` columns)."""

_AGENT_TOKEN_FILE = "<agent home>/agent_token"
"""Where an agent keeps its own token (as messages name it)."""


def hash_token(token: str) -> str:
    """The stored form of an agent token: SHA-256, lower-case hex.

    A plain, fast hash is enough here, unlike for passwords: agent tokens are
    ``secrets.token_urlsafe(32)``, 256 random bits, so nobody can guess them from their hash by
    trying candidates, and a slow hash (argon2) would only make every sync expensive. Storing
    the hash still means a copy of the database does not hand out working tokens.
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """What a presented token allows: sync as the agent (``token_hash``: the credential that
    authorized it), or enroll (``enroll``: issue a token with :func:`enroll`, nothing else)."""

    agent_id: str
    token_hash: str | None = None
    enroll: bool = False
    confirm: bool = False
    """The credential was presented for the first time: :func:`confirm` it."""


def _revoked_message(agent_id: str, when: dt.datetime) -> str:
    stamp = when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"agent {agent_id!r} was revoked by an admin ({stamp}): its token and the enrollment "
        f"token are refused for this id; an admin can let it enroll again with "
        f"`stalwart agent revoke {agent_id} --reenroll`"
    )


def authenticate(session: Session, agent_id: str, presented: str, enrollment: str) -> Verdict:
    """The verdict for a sync of ``agent_id`` presenting ``presented`` (see the module
    docstring); raises UnauthenticatedError when refused. Only reads."""
    given = presented.encode("utf-8")
    own_hash = hash_token(presented)
    row = session.get(AgentCredential, agent_id)
    own = row is not None and hmac.compare_digest(own_hash, row.token_hash)
    enrolling = bool(enrollment) and hmac.compare_digest(given, enrollment.encode("utf-8"))
    if not presented or not (own or enrolling):
        raise UnauthenticatedError(
            f"invalid agent token for agent {agent_id!r}: a new agent enrolls with the "
            "master's enrollment token (--token, STALWART_AGENT_TOKEN or --token-file; the "
            "master writes it to <master home>/agent_token); an enrolled agent presents its "
            f"own token ({_AGENT_TOKEN_FILE})"
        )
    if row is not None and row.revoked_at is not None:
        raise UnauthenticatedError(_revoked_message(agent_id, row.revoked_at))
    if own:
        assert row is not None
        return Verdict(agent_id, token_hash=row.token_hash, confirm=row.confirmed_at is None)
    if row is not None and row.confirmed_at is not None:
        raise UnauthenticatedError(_enrolled_message(agent_id))
    return Verdict(agent_id, enroll=True)


def _enrolled_message(agent_id: str) -> str:
    return (
        f"agent {agent_id!r} is enrolled already: the enrollment token no longer opens this "
        f"id. Start the agent with its own token (the agent keeps it in {_AGENT_TOKEN_FILE}; "
        "keep that --home). If the token is lost, an admin can let the id enroll again with "
        f"`stalwart agent revoke {agent_id} --reenroll`"
    )


def enroll(session: Session, agent_id: str, *, now: dt.datetime | None = None) -> str:
    """Issue ``agent_id`` a new token (replacing an unconfirmed one) and commit; the token, to
    be sent once. Raises UnauthenticatedError when the id was enrolled and confirmed, or
    revoked, meanwhile (a concurrent enrollment won); InvalidArgumentError for an id longer
    than the agents table holds."""
    if len(agent_id) > MAX_AGENT_ID:
        raise InvalidArgumentError(f"an agent id has at most {MAX_AGENT_ID} characters")
    token = secrets.token_urlsafe(32)
    when = now or utcnow()
    row = session.get(AgentCredential, agent_id, with_for_update=True)
    if row is None:
        session.add(
            AgentCredential(agent_id=agent_id, token_hash=hash_token(token), created_at=when)
        )
    elif row.revoked_at is not None:
        raise UnauthenticatedError(_revoked_message(agent_id, row.revoked_at))
    elif row.confirmed_at is not None:
        raise UnauthenticatedError(_enrolled_message(agent_id))
    else:
        row.token_hash, row.created_at = hash_token(token), when
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise UnauthenticatedError(_enrolled_message(agent_id)) from None
    return token


def confirm(session: Session, verdict: Verdict, *, now: dt.datetime | None = None) -> None:
    """Record that the agent used its token (once; later enrollments of the id are refused);
    commits."""
    row = session.get(AgentCredential, verdict.agent_id)
    if row is not None and row.token_hash == verdict.token_hash and row.confirmed_at is None:
        row.confirmed_at = now or utcnow()
        session.commit()


def still_valid(session: Session, agent_id: str, token_hash: str) -> bool:
    """Whether the credential that authorized a sync still stands (not revoked, not replaced):
    checked again before a long-poll that waited answers."""
    row = session.get(AgentCredential, agent_id)
    return row is not None and row.revoked_at is None and row.token_hash == token_hash


def list_credentials(session: Session) -> list[AgentCredential]:
    """Every credential, by agent id."""
    return list(session.scalars(select(AgentCredential).order_by(AgentCredential.agent_id)))


def revoke(
    session: Session, agent_id: str, *, reenroll: bool = False, now: dt.datetime | None = None
) -> AgentCredential | None:
    """Revoke ``agent_id``'s credential and commit: forbid the id (the row stays, with
    ``revoked_at``; an earlier revocation's time is kept), or with ``reenroll`` delete the row
    so that the next sync with the enrollment token enrolls it again. Returns the forbidden
    row, or None after ``reenroll``. NotFoundError when the id has no credential."""
    row = session.get(AgentCredential, agent_id)
    if row is None:
        raise NotFoundError(f"agent {agent_id!r} has no credential (it never enrolled)")
    if reenroll:
        session.delete(row)
        session.commit()
        return None
    if row.revoked_at is None:
        row.revoked_at = now or utcnow()
    session.commit()
    return row
