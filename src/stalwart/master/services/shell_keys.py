"""The key pair of a shell task: the public half goes into the task, the private half to its
owner (``det shell start`` / ``open`` writes it to a file and hands it to ``ssh -i``).

RSA 4096 in OpenSSH formats, made with ``cryptography`` (no ``ssh-keygen`` on the master).
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["generate_key_pair"]


def generate_key_pair() -> tuple[str, str]:
    """A fresh ``(private key in OpenSSH PEM, public key as an authorized_keys line)``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=4096)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return private, public + " stalwart-shell\n"
