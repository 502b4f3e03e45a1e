"""``resource_manager: {type: kubernetes}`` in the master config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stalwart.errors import ConfigError
from stalwart.master.rm.kubernetes.settings import KubernetesSettings
from stalwart.master.settings import load_settings


def test_the_kubernetes_section_loads_with_its_defaults(tmp_path: Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text(
        "resource_manager:\n  type: kubernetes\n  namespace: ml\n"
        "  pool_slot_types: {cpu-pool: cpu}\n  priority_classes: {10: high}\n"
    )
    rm = load_settings(path, environ={}).resource_manager
    assert isinstance(rm, KubernetesSettings)
    assert (rm.namespace, rm.max_slots_per_pod, rm.prepull.enabled) == ("ml", 8, True)
    assert rm.pool_slot_type("cpu-pool") == "cpu"
    assert rm.pool_slot_type("other") == "cuda"
    assert rm.priority_classes == {10: "high"}


def test_a_wrong_setting_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text("resource_manager:\n  type: kubernetes\n  max_slots_per_pod: 0\n")
    with pytest.raises(ConfigError, match="max_slots_per_pod"):
        load_settings(path, environ={})


def test_the_master_imports_the_kubernetes_manager_only_when_configured() -> None:
    code = (
        "import sys; import stalwart.master.app, stalwart.master.cluster.loop; "
        "print('stalwart.master.rm.kubernetes.manager' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
