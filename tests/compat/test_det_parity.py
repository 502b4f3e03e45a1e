"""What the official 0.38.1 client and SDK ask, answered as Determined answers it (issue 23's
findings, each proven with the unmodified client against a real master).

- ``GET /api/v1/master`` answers before login (the client and scripts read it first);
- ``GET /api/v1/master/config`` carries ``feature_switches``;
- ``PATCH /api/v1/users/{id}`` with ``displayName: ""`` reads back ``""``;
- a legacy unitless ``searcher.max_length: 10`` is accepted and kept as written.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.compat.conftest import Det, describe

pytestmark = pytest.mark.compat


def _sdk(det: Det, script: str) -> str:
    """Run ``script`` with the official package (``sys.argv[1]`` is the master's URL); its
    stdout."""
    done = subprocess.run(
        [str(det.executable.parent / "python"), "-c", script, det.master.url],
        capture_output=True,
        text=True,
        env=det.env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, describe(done)
    return done.stdout


def test_master_info_is_read_before_login(det: Det) -> None:
    out = _sdk(
        det,
        "import sys\n"
        "from determined.common import api\n"
        "from determined.common.api import bindings\n"
        "info = bindings.get_GetMaster(api.UnauthSession(sys.argv[1], cert=None))\n"
        "print(info.clusterName, info.version)\n",
    )
    assert out.split() == ["stalwart", "0.38.1"]


def test_master_config_has_feature_switches(det: Det) -> None:
    out = _sdk(
        det,
        "import json, sys\n"
        "from determined.common.api import authentication, bindings\n"
        "session = authentication.login(sys.argv[1], 'admin', '')\n"
        "print(json.dumps(bindings.get_GetMasterConfig(session).config['feature_switches']))\n",
    )
    assert json.loads(out) == []


def test_a_cleared_display_name_reads_back_empty(det: Det) -> None:
    det.login("admin", "")
    det.ok("user", "create", "dora", "--password", "Dora-Pass-123")
    out = _sdk(
        det,
        "import sys\n"
        "from determined.common.api import authentication, bindings\n"
        "session = authentication.login(sys.argv[1], 'admin', '')\n"
        "user = bindings.get_GetUserByUsername(session, username='dora').user\n"
        "bindings.patch_PatchUser(session, body=bindings.v1PatchUser(displayName='Dee'),"
        " userId=user.id)\n"
        "bindings.patch_PatchUser(session, body=bindings.v1PatchUser(displayName=''),"
        " userId=user.id)\n"
        "print(repr(bindings.get_GetUser(session, userId=user.id).user.displayName))\n",
    )
    assert out.strip() == "''"


def test_a_unitless_max_length_is_accepted(det: Det, tmp_path: Path) -> None:
    det.login("admin", "")
    config = tmp_path / "legacy.yaml"
    config.write_text(
        "name: legacy-length\n"
        "entrypoint: python3 -c 'pass'\n"
        "searcher:\n  name: single\n  metric: loss\n  max_length: 10\n",
        encoding="utf-8",
    )
    model = tmp_path / "model"
    model.mkdir()
    (model / "note.txt").write_text("context\n", encoding="utf-8")
    done = det.ok("experiment", "create", str(config), str(model), "--paused")
    exp_id = done.stdout.split("Created experiment ")[1].split()[0]
    described = json.loads(det.ok("experiment", "describe", exp_id, "--json").stdout)
    assert described[0]["experiment"]["config"]["searcher"]["max_length"] == 10
