"""Passwords: Determined's client-side hash, and a slow salted hash for storage.

The official client sends ``sha512(CLIENT_SALT + password)`` (``""`` stays ``""``) with
``isHashed: true``; a plain password (``isHashed: false``) is hashed the same way first. What is
stored is scrypt of that hex string with a random 16-byte salt (``scrypt$N$r$p$salt$digest``),
compared in constant time. A stored hash made with other parameters still verifies, and
:func:`needs_rehash` tells login to replace it with a current one. An empty password matches
only a user whose stored hash is NULL (Determined's rule).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

__all__ = ["client_hash", "hash_password", "needs_rehash", "verify_password"]

CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"  # part of Determined's wire protocol
_N, _R, _P = 2**14, 8, 1


def client_hash(password: str) -> str:
    """What the official client sends for ``password``."""
    if password == "":
        return ""
    return hashlib.sha512((CLIENT_SALT + password).encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hash_password(hashed: str) -> str | None:
    """The stored form of a client-hashed password; None for the empty password."""
    if hashed == "":
        return None
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(hashed.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=32)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_password(hashed: str, stored: str | None) -> bool:
    """Whether client-hashed ``hashed`` matches ``stored`` (constant time)."""
    if stored is None:
        return hashed == ""
    if hashed == "":
        return False
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    got = hashlib.scrypt(
        hashed.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=32
    )
    return hmac.compare_digest(got, base64.b64decode(digest))


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` (a valid scrypt hash) uses parameters other than the current ones."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return False  # not a password hash (e.g. a remote user's marker): leave it
    return parts[1:4] != [str(_N), str(_R), str(_P)]
