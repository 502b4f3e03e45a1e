"""The API client, the informers and the rate limits, against the fake (and a real cluster when
``KUBECONFIG`` is set)."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stalwart.master.rm.kubernetes.client import (
    AlreadyExistsError,
    GoneError,
    KubeError,
    KubernetesClientApi,
    WatchEvent,
    load_config,
)
from stalwart.master.rm.kubernetes.informer import Informer
from stalwart.master.rm.kubernetes.queue import RateLimitedApi, TokenBucket
from tests.k8s.conftest import Cluster
from tests.k8s.fake_api import ApiError, FakeKube


def config_map(name: str, value: str = "1", label: str = "t") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"stalwart-test": label}},
        "data": {"value": value},
    }


def wait(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout:g}s")


def test_create_get_list_replace_delete(kube: Cluster) -> None:
    api, ns, name = kube.api, kube.namespace, kube.prefix + "-a"
    created = api.create("configmaps", ns, config_map(name, label=kube.prefix))
    assert created["metadata"]["resourceVersion"]
    with pytest.raises(AlreadyExistsError):
        api.create("configmaps", ns, config_map(name))
    got = api.get("configmaps", ns, name)
    assert got is not None
    assert got["data"] == {"value": "1"}
    items, version = api.list("configmaps", ns, f"stalwart-test={kube.prefix}")
    assert [i["metadata"]["name"] for i in items] == [name]
    assert version
    got["data"] = {"value": "2"}
    assert api.replace("configmaps", ns, name, got)["data"] == {"value": "2"}
    api.delete("configmaps", ns, name)
    api.delete("configmaps", ns, name)  # idempotent
    assert api.get("configmaps", ns, name) is None


def test_watch_sees_changes_after_a_version_and_410_for_a_compacted_one(kube: Cluster) -> None:
    api, ns, name = kube.api, kube.namespace, kube.prefix + "-w"
    selector = f"stalwart-test={kube.prefix}"
    _, version = api.list("configmaps", ns, selector)
    api.create("configmaps", ns, config_map(name, label=kube.prefix))
    api.delete("configmaps", ns, name)
    seen: list[WatchEvent] = []
    events = api.watch("configmaps", ns, version, selector, timeout_seconds=5)
    for event in events:
        if event.type != "BOOKMARK":
            seen.append(event)
        if len(seen) == 2:
            break
    events.close()
    assert [e.type for e in seen] == ["ADDED", "DELETED"]
    assert all(e.object["metadata"]["name"] == name for e in seen)
    if kube.fake is not None:
        kube.fake.compact()
    with pytest.raises(GoneError):
        list(api.watch("configmaps", ns, "1", selector, timeout_seconds=5))


def test_a_quiet_watch_gets_bookmarks_that_advance_its_version(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(fake_kube.kubeconfig())
    api = KubernetesClientApi(load_config(config, {}))
    _, version = api.list("configmaps", "default")
    fake_kube.create("configmaps", "other", config_map("elsewhere"))
    events = api.watch("configmaps", "default", version, timeout_seconds=5)
    bookmark = next(events)
    assert bookmark.type == "BOOKMARK"
    assert int(bookmark.resource_version) > int(version)
    events.close()
    api.close()


def test_the_informer_follows_changes_and_relists_after_410(kube: Cluster) -> None:
    api, ns = kube.api, kube.namespace
    selector = f"stalwart-test={kube.prefix}"
    api.create("configmaps", ns, config_map(kube.prefix + "-1", label=kube.prefix))
    changes = threading.Event()
    informer = Informer(api, "configmaps", ns, selector, on_change=changes.set, watch_timeout=1)
    informer.start()
    try:
        assert informer.synced.wait(30)
        assert [o["metadata"]["name"] for o in informer.objects()] == [kube.prefix + "-1"]
        api.create("configmaps", ns, config_map(kube.prefix + "-2", label=kube.prefix))
        wait(lambda: informer.get(kube.prefix + "-2"), "the informer sees the new object")
        assert changes.is_set()
        if kube.fake is None:
            return
        # The watch breaks; meanwhile an object is deleted and the history is compacted: the
        # informer's next watch gets 410 Gone, and it lists again.
        fake = kube.fake
        fake.refuse_watches = True
        wait(lambda: fake.refused_watches > 0, "the informer's watch to be refused")
        api.delete("configmaps", ns, kube.prefix + "-1")
        fake.compact()
        fake.refuse_watches = False
        wait(lambda: informer.relists >= 2, "a relist after 410 Gone")
        wait(lambda: informer.get(kube.prefix + "-1") is None, "the deletion is seen")
    finally:
        informer.stop()


def test_api_errors_say_what_failed_and_transient_ones_are_retried(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(fake_kube.kubeconfig())
    api = RateLimitedApi(
        KubernetesClientApi(load_config(config, {})), qps=100, burst=10, backoff=0.01
    )
    fake_kube.fail_next[("POST", "configmaps")] = ApiError(
        503, "ServiceUnavailable", "etcd is busy"
    )
    api.create("configmaps", "default", config_map("retried"))
    assert fake_kube.get("configmaps", "default", "retried")["data"] == {"value": "1"}
    fake_kube.fail_next[("POST", "configmaps")] = ApiError(
        403, "Forbidden", 'exceeded quota: "compute"'
    )
    with pytest.raises(KubeError, match="exceeded quota") as info:
        api.create("configmaps", "default", config_map("refused"))
    assert info.value.code == 403
    assert not info.value.retryable
    invalid = config_map("invalid") | {"data": {"value": 1}}
    with pytest.raises(KubeError, match=r"data\.value") as bad:
        api.create("configmaps", "default", invalid)
    assert bad.value.code == 422
    api.close()


def test_a_wrong_token_is_refused(fake_kube: FakeKube, tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(fake_kube.kubeconfig().replace("test-token", "wrong"))
    api = KubernetesClientApi(load_config(config, {}))
    with pytest.raises(KubeError, match="Unauthorized"):
        api.list("pods", "default")
    api.close()


def test_token_bucket_waits_once_the_burst_is_spent() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=3, clock=lambda: now[0])
    assert [bucket.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.delay() == pytest.approx(0.1)
    now[0] = 1.0
    assert bucket.delay() == 0.0


def test_kubeconfig_credentials_and_a_clear_error_without_one(tmp_path: Path) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://k8s.example:6443', "
        f"certificate-authority-data: {ca}}}}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: ml}}]\n"
    )
    loaded = load_config(None, {"KUBECONFIG": str(config)})
    assert (loaded.server, loaded.token, loaded.namespace) == (
        "https://k8s.example:6443",
        "abc",
        "ml",
    )
    assert loaded.ca_file is not None
    assert Path(loaded.ca_file).read_bytes().startswith(b"-----BEGIN")
    with pytest.raises(KubeError, match=r"set KUBECONFIG or resource_manager\.kubeconfig"):
        load_config(None, {"HOME": str(tmp_path / "nobody")})
