"""Master URLs, the environment, and the token cache (pure, on temporary directories)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from stalwart.client.auth import (
    ClientEnv,
    TokenStore,
    canonical_url,
    client_env,
    salt_and_hash,
)
from stalwart.master.services.passwords import client_hash


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("localhost", "http://localhost:8080"),
        ("10.0.0.1:9000", "http://10.0.0.1:9000"),
        ("http://host:8080/", "http://host:8080"),
        ("https://stalwart.example.com", "https://stalwart.example.com"),
        ("[::1]", "http://[::1]:8080"),
    ],
)
def test_canonical_url(given: str, canonical: str) -> None:
    assert canonical_url(given) == canonical


def test_environment_precedence(tmp_path: Path) -> None:
    env = client_env(
        {
            "STALWART_MASTER": "http://a:1",
            "DET_MASTER": "http://b:2",
            "DET_USER": "det",
            "DET_PASS": "pw",
            "XDG_CONFIG_HOME": str(tmp_path),
        }
    )
    assert env.master == "http://a:1"
    assert (env.user, env.password) == ("det", "pw")
    assert env.config_dir == tmp_path / "stalwart"
    env = client_env({"DET_MASTER": "http://b:2", "DET_PASS": "x"})
    assert env.master == "http://b:2"
    assert (env.user, env.password) == (None, None)  # DET_PASS belongs to DET_USER
    assert client_env({}) == ClientEnv()


def test_password_hash_is_determineds() -> None:
    assert salt_and_hash("") == ""
    assert salt_and_hash("pw") == client_hash("pw")  # what the master computes
    assert len(salt_and_hash("pw")) == 128


def test_token_store_is_private_and_per_master_and_user(tmp_path: Path) -> None:
    store = TokenStore(config_dir=tmp_path / "cfg")
    assert store.token("localhost", "admin") is None
    store.put("localhost", "admin", "t1", activate=True)
    store.put("http://localhost:8080/", "bob", "t2", activate=False)
    assert store.token("http://localhost:8080", "admin") == "t1"
    assert store.token("localhost:8080", "bob") == "t2"
    assert store.active_user("localhost") == "admin"
    assert store.token("otherhost", "admin") is None
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    data = json.loads(store.path.read_text())
    assert data["version"] == 2
    assert data["masters"]["http://localhost:8080"]["tokens"] == {"admin": "t1", "bob": "t2"}
    store.drop("localhost", "admin", forget_user=False)
    assert store.token("localhost", "admin") is None
    assert store.active_user("localhost") == "admin"
    store.drop("localhost", "admin", forget_user=True)
    assert store.active_user("localhost") is None
    assert list(store.path.parent.iterdir()) == [store.path]  # no temporary files left


def test_corrupt_store_reads_as_empty(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "auth.json")
    store.path.write_text("{not json")
    assert store.token("localhost", "admin") is None
    store.put("localhost", "admin", "t", activate=True)
    assert store.token("localhost", "admin") == "t"
