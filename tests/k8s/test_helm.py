"""The Helm chart ``helm/stalwart``: rendered (``helm template`` semantics, see
:mod:`tests.k8s.helm_render`), validated against Kubernetes 1.29-1.32, and its master config
loaded by the master's own settings loader."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from stalwart.environments.manifest import load_manifest
from stalwart.master.rm.kubernetes.client import KINDS
from stalwart.master.rm.kubernetes.settings import KubernetesSettings
from stalwart.master.settings import load_settings
from tests.k8s.helm_render import UnsupportedTemplateError, _parse, _Renderer, render_chart
from tests.k8s.validate import assert_valid

CHART = Path(__file__).resolve().parents[2] / "helm" / "stalwart"

VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "external-db-no-prepull": {
        "postgresql": {"enabled": False},
        "externalDatabase": {
            "url": "postgresql://stalwart@db.example:5432/stalwart",
            "passwordSecret": "stalwart-db",
        },
        "prepull": {"enabled": False, "priorityClass": "stalwart-prepull"},
    },
    "pools": {
        "resourceManager": {
            "slotType": "cpu",
            "poolSlotTypes": {"a100": "cuda", "mi250": "rocm"},
            "workspaceNamespaces": {"vision": "team-vision"},
            "poolNodeSelectors": {"a100": {"gpu": "a100"}},
            "priorityClasses": {"10": "stalwart-high"},
            "defaultPriorityClass": "stalwart-medium",
        },
        "resourcePools": [{"pool_name": "a100"}, {"pool_name": "mi250"}],
        "taskContainerDefaults": {
            "gpu_pod_spec": {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}
        },
        "postgresql": {"storageClassName": "fast"},
        "checkpointStorage": {"type": "shared_fs", "host_path": "/mnt/ckpt"},
    },
}


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_chart_renders_valid_kubernetes(name: str) -> None:
    objects = render_chart(CHART, VARIANTS[name])
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ConfigMap"} <= kinds
    assert ("StatefulSet" in kinds) == (name != "external-db-no-prepull")
    assert_valid(objects)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_master_config_from_values_loads_as_master_settings(name: str, tmp_path: Path) -> None:
    objects = render_chart(CHART, VARIANTS[name], namespace="ml")
    (config_map,) = by_kind(objects, "ConfigMap")
    path = tmp_path / "master.yaml"
    path.write_text(config_map["data"]["master.yaml"])
    settings = load_settings(path, environ={})
    rm = settings.resource_manager
    assert isinstance(rm, KubernetesSettings)
    assert rm.namespace == "ml"
    assert rm.master_url == "http://stalwart-stalwart.ml.svc:8080"
    assert rm.prepull.enabled == (name != "external-db-no-prepull")
    tcd = settings.task_container_defaults or {}
    manifest = load_manifest()
    assert tcd["image"] == {
        d: manifest.default_image("pytorch", d)[1] for d in ("cpu", "cuda", "rocm")
    }
    if name == "pools":
        assert rm.pool_slot_types == {"a100": "cuda", "mi250": "rocm"}
        assert rm.workspace_namespaces == {"vision": "team-vision"}
        assert rm.priority_classes == {10: "stalwart-high"}
        assert settings.default_checkpoint_storage["type"] == "shared_fs"


def test_the_master_runs_as_its_service_account_with_the_database_from_a_secret() -> None:
    objects = render_chart(CHART)
    (deployment,) = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (account,) = by_kind(objects, "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert (
        env["STALWART_DB_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "stalwart-stalwart-db"
    )
    assert (
        "$(STALWART_DB_PASSWORD)@stalwart-stalwart-postgresql:5432" in env["STALWART_DB"]["value"]
    )
    (secret,) = by_kind(objects, "Secret")
    assert secret["data"]["password"]
    external = render_chart(CHART, VARIANTS["external-db-no-prepull"])
    (ext,) = by_kind(external, "Deployment")
    ext_env = {e["name"]: e for e in ext["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert ext_env["STALWART_DB"]["value"] == "postgresql://stalwart@db.example:5432/stalwart"
    assert ext_env["STALWART_DB_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "stalwart-db"


def test_rbac_allows_every_call_the_resource_manager_makes() -> None:
    (role,) = by_kind(render_chart(CHART), "Role")
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    groups = {"/api/v1": "", "/apis/batch/v1": "batch", "/apis/apps/v1": "apps"}
    for kind, path in KINDS.items():
        verbs = ["get", "list", "watch"]
        if kind not in ("events", "pods"):
            verbs += ["create", "delete"]
        if kind == "daemonsets":
            verbs.append("update")
        for verb in verbs:
            assert (groups[path], kind, verb) in granted, (kind, verb)


def test_the_renderer_refuses_what_it_does_not_implement() -> None:
    with pytest.raises(UnsupportedTemplateError):
        _parse("{{ range .Values.x }}{{ end }}")
    renderer = _Renderer({})
    with pytest.raises(UnsupportedTemplateError, match="lookup"):
        renderer.pipeline(".Values.x | lookup", {})


def test_helm_template_agrees_when_helm_is_installed(tmp_path: Path) -> None:
    helm = shutil.which("helm")
    if helm is None:
        pytest.skip("no helm binary (Debian does not package it): the chart was rendered in Python")
    done = subprocess.run(
        [helm, "template", "stalwart", str(CHART), "--namespace", "stalwart"],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = [d for d in yaml.safe_load_all(done.stdout) if d]
    ours = render_chart(CHART)
    for obj in (*theirs, *ours):
        if obj["kind"] == "Secret":
            obj["data"] = {}

    def key(o: dict[str, Any]) -> tuple[str, str]:
        return (o["kind"], o["metadata"]["name"])

    assert sorted(theirs, key=key) == sorted(ours, key=key)
