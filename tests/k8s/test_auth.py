"""How the master authenticates to the API server, through ``load_config`` and the client it
builds (real HTTPS against the fake): a kubeconfig ``exec`` credential plugin (EKS, GKE, AKS
and OIDC logins work this way), its token fetched again when it is about to expire, and the
in-cluster service account whose token file the kubelet rotates."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stalwart.master.rm.kubernetes.client import (
    KubeConfig,
    KubeError,
    KubernetesClientApi,
    load_config,
)
from tests.k8s.fake_api import FakeKube

PLUGIN = """#!{python}
import datetime, json, pathlib, sys

status = {{"token": pathlib.Path(sys.argv[1]).read_text().strip()}}
if len(sys.argv) > 2:
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
        minutes=float(sys.argv[2])
    )
    status["expirationTimestamp"] = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": status,
}}))
"""
"""An exec credential plugin: prints the token in the file ``argv[1]`` (expiring in ``argv[2]``
minutes when given), as ``aws eks get-token`` or ``kubelogin`` print theirs."""


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


@pytest.fixture
def tls_kube() -> Iterator[FakeKube]:
    """A fake API server over HTTPS that wants the token ``first``."""
    fake = FakeKube(bookmark_interval=0.2, token="first", tls=True)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def exec_kubeconfig(fake: FakeKube, tmp_path: Path, *args: str) -> Path:
    """A kubeconfig whose user runs the plugin with ``args``."""
    plugin = tmp_path / "get-token"
    plugin.write_text(PLUGIN.format(python=sys.executable))
    plugin.chmod(0o755)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(plugin),
            "args": list(args),
            "interactiveMode": "Never",
        }
    }
    config = tmp_path / "kubeconfig"
    config.write_text(fake.kubeconfig(user=user))
    return config


def test_an_exec_plugin_in_the_kubeconfig_authenticates(tls_kube: FakeKube, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    api = KubernetesClientApi(load_config(exec_kubeconfig(tls_kube, tmp_path, str(token)), {}))
    try:
        api.create("configmaps", "default", config_map("a"))
        items, version = api.list("configmaps", "default")
        assert [i["metadata"]["name"] for i in items] == ["a"]
        events = api.watch("configmaps", "default", version, timeout_seconds=5)
        assert next(events).type == "BOOKMARK"
        events.close()
    finally:
        api.close()

    token.write_text("wrong")
    refused = KubernetesClientApi(load_config(exec_kubeconfig(tls_kube, tmp_path, str(token)), {}))
    with pytest.raises(KubeError, match="Unauthorized") as info:
        refused.list("configmaps", "default")
    assert info.value.code == 401
    assert not info.value.retryable
    refused.close()


def test_a_failing_exec_plugin_is_logged_and_the_calls_refused(
    tls_kube: FakeKube, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No token file: the plugin exits with an error.
    config = exec_kubeconfig(tls_kube, tmp_path, str(tmp_path / "missing"))
    api = KubernetesClientApi(load_config(config, {}))
    assert any("exec: process returned 1" in r.getMessage() for r in caplog.records)
    with pytest.raises(KubeError) as info:
        api.list("configmaps", "default")
    assert info.value.code == 401
    api.close()


def test_an_expiring_exec_token_is_fetched_again(tls_kube: FakeKube, tmp_path: Path) -> None:
    # The plugin says its tokens expire in a minute: inside the client's five-minute margin, so
    # every call asks the plugin again (a real plugin's 15-minute token: after 10 minutes).
    token = tmp_path / "token"
    token.write_text("first")
    api = KubernetesClientApi(load_config(exec_kubeconfig(tls_kube, tmp_path, str(token), "1"), {}))
    try:
        api.create("configmaps", "default", config_map("a"))
        token.write_text("second")
        tls_kube.token = "second"
        assert api.get("configmaps", "default", "a") is not None
        _, version = api.list("configmaps", "default")
        events = api.watch("configmaps", "default", version, timeout_seconds=5)
        assert next(events).type == "BOOKMARK"
        events.close()
    finally:
        api.close()


def service_account(tmp_path: Path, fake: FakeKube, token: str) -> Path:
    """The files the kubelet mounts into a pod for its service account."""
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(fake.ca_pem)
    (directory / "namespace").write_text("ml")
    return directory


def expire_now(config: KubeConfig) -> None:
    """Move the in-cluster loader's clock on: it reads the token file again once a minute."""
    config.loader.token_expires_at = dt.datetime.now() - dt.timedelta(seconds=1)


def test_in_cluster_the_rotated_service_account_token_is_used(
    tls_kube: FakeKube, tmp_path: Path
) -> None:
    directory = service_account(tmp_path, tls_kube, "first")
    environ = {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(tls_kube.port),
    }
    config = load_config(None, environ, service_account=directory)
    assert (config.server, config.namespace) == (f"https://127.0.0.1:{tls_kube.port}", "ml")
    api = KubernetesClientApi(config)
    try:
        api.create("configmaps", "ml", config_map("a"))
        # The kubelet writes a new token; the server stops accepting the old one.
        (directory / "token").write_text("second")
        tls_kube.token = "second"
        expire_now(config)
        assert api.get("configmaps", "ml", "a") is not None
        assert config.token == "second"
        _, version = api.list("configmaps", "ml")
        events = api.watch("configmaps", "ml", version, timeout_seconds=5)
        assert next(events).type == "BOOKMARK"
        events.close()
    finally:
        api.close()


def test_a_missing_kubeconfig_or_service_account_says_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match="no such file"):
        load_config(tmp_path / "nope", {})
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text("t")
    with pytest.raises(KubeError, match="service account"):
        load_config(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, service_account=directory)
