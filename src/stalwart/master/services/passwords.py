"""Passwords: Determined's client-side hash, and a slow salted hash (argon2id) for storage.

The official client sends ``sha512(CLIENT_SALT + password)`` (``""`` stays ``""``) with
``isHashed: true``; a plain password (``isHashed: false``) is hashed the same way first. What is
stored is argon2id of that hex string (argon2-cffi's PHC string ``$argon2id$v=19$m=...``, a
random 16-byte salt each), with OWASP's parameters (19 MiB, 2 passes, 1 lane): about as slow
as the scrypt (N=2^14) it replaces. Hashes of older masters (``scrypt$N$r$p$salt$digest``) still
verify, and so do the hashes of users imported from Determined (bcrypt of the client-hashed
password's first 72 bytes, ``$2a$...``: ``stalwart import determined``); :func:`needs_rehash`
tells login to replace them (and argon2id hashes made with other parameters) with a current one.

An empty password matches only a user whose stored hash is NULL (Determined's rule).
:func:`verify_password` does the work of one full hash whatever it is given (an unknown user,
a user without a password, a remote user's marker), so the time a login takes does not tell
those apart from a real account (for a user that does not exist, verify against ``None`` and
refuse whatever the answer).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

import bcrypt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = [
    "CLIENT_SALT",
    "client_hash",
    "hash_password",
    "needs_rehash",
    "verify_password",
]

CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"  # part of Determined's wire protocol

_HASHER = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
"""argon2id with OWASP's recommended minimum (m=19 MiB, t=2, p=1)."""


def client_hash(password: str) -> str:
    """What the official client sends for ``password``."""
    if password == "":
        return ""
    return hashlib.sha512((CLIENT_SALT + password).encode()).hexdigest()


def hash_password(hashed: str) -> str | None:
    """The stored form of a client-hashed password; None for the empty password."""
    if hashed == "":
        return None
    return _HASHER.hash(hashed)


@functools.cache
def _dummy_hash() -> str:
    """A hash of a random password, verified against when there is nothing real to verify."""
    return _HASHER.hash(secrets.token_hex(64))


def _argon2_verify(stored: str, hashed: str) -> bool:
    """The one place that runs argon2 to check a password (tests count its calls)."""
    try:
        return _HASHER.verify(stored, hashed)
    except (VerificationError, InvalidHashError):
        return False


def _scrypt_verify(stored: str, hashed: str) -> bool | None:
    """``stored`` as an older master's scrypt hash: whether it matches; None if not one."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return None
        got = hashlib.scrypt(
            hashed.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=2**27,
            dklen=32,
        )
        return hmac.compare_digest(got, base64.b64decode(digest))
    except ValueError:
        return None


_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")


def _bcrypt_verify(stored: str, hashed: str) -> bool:
    """``stored`` as Determined's bcrypt hash: whether client-hashed ``hashed`` matches it.

    Determined hashes the first 72 bytes of what the client sends (bcrypt reads no more).
    """
    try:
        return bcrypt.checkpw(hashed.encode()[:72], stored.encode())
    except ValueError:
        return False


def verify_password(hashed: str, stored: str | None) -> bool:
    """Whether client-hashed ``hashed`` matches ``stored`` (``None``: the user has no password).

    Every call does the work of one full hash, whatever the answer: a user without a password
    or a remote user's marker is verified against a dummy hash first.
    """
    if stored is not None:
        if stored.startswith("$argon2"):
            return _argon2_verify(stored, hashed) and hashed != ""
        if stored.startswith(_BCRYPT_PREFIXES) and hashed != "":
            return _bcrypt_verify(stored, hashed)
        legacy = _scrypt_verify(stored, hashed) if hashed != "" else None
        if legacy is not None:
            return legacy
    # Nothing real to check: spend the same time, then answer by Determined's rule.
    _argon2_verify(_dummy_hash(), hashed or "-")
    return stored is None and hashed == ""


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` is a valid hash made otherwise than today (scrypt, Determined's bcrypt,
    or argon2id with other parameters); False for anything else (e.g. a remote user's
    marker)."""
    if stored.startswith(_BCRYPT_PREFIXES):
        return True
    if stored.startswith("$argon2"):
        try:
            return _HASHER.check_needs_rehash(stored)
        except (InvalidHashError, ValueError):
            return False
    parts = stored.split("$")
    return len(parts) == 6 and parts[0] == "scrypt"
