"""Fixtures of the Kubernetes tests: the shipped fake API server, or a real cluster.

``kube`` runs a test twice: against the fake (:mod:`tests.k8s.fake_api`, always) and against a
real cluster when ``KUBECONFIG`` is set (objects go to ``$STALWART_K8S_TEST_NAMESPACE``,
default ``default``, and are deleted afterwards). Without ``KUBECONFIG`` the real-cluster run
is skipped with that reason: no cluster exists on the machines that run ``make test``.
Tests that move pods through their phases need the fake (``fake_kube``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stalwart.master.rm.kubernetes.client import KubeApi, KubernetesClientApi, load_config
from tests.k8s.fake_api import FakeKube


@dataclass
class Cluster:
    """An API to test against: ``fake`` is None on a real cluster."""

    api: KubeApi
    namespace: str
    fake: FakeKube | None
    prefix: str
    """A name prefix unique to the test (objects it creates start with it)."""


@pytest.fixture
def fake_kube(tmp_path: Path) -> Iterator[FakeKube]:
    """A started fake API server (bookmarks every 0.2 s)."""
    fake = FakeKube(bookmark_interval=0.2, token="test-token")
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(params=["fake", "real-cluster"])
def kube(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    prefix = f"sw-test-{secrets.token_hex(3)}"
    if request.param == "real-cluster":
        if not os.environ.get("KUBECONFIG"):
            pytest.skip("no KUBECONFIG: set it to a test cluster to run this test against it too")
        api = KubernetesClientApi(load_config(None, os.environ))
        namespace = os.environ.get("STALWART_K8S_TEST_NAMESPACE", "default")
        try:
            yield Cluster(api, namespace, None, prefix)
        finally:
            for kind in ("configmaps", "jobs"):
                items, _ = api.list(kind, namespace)
                for item in items:
                    if item["metadata"]["name"].startswith(prefix):
                        api.delete(kind, namespace, item["metadata"]["name"])
            api.close()
        return
    fake = FakeKube(bookmark_interval=0.2, token="test-token")
    fake.start()
    config = tmp_path / "kubeconfig"
    config.write_text(fake.kubeconfig())
    api = KubernetesClientApi(load_config(config, {}))
    try:
        yield Cluster(api, "default", fake, prefix)
    finally:
        api.close()
        fake.stop()
