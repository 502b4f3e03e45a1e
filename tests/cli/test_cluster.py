"""``stalwart agent list``, ``slot list``, ``master info`` and ``master config``."""

from __future__ import annotations

import json
import re

import yaml

from tests.cli.conftest import Cli, one_error_line


def test_agent_list(cli: Cli) -> None:
    result = cli("agent", "list")
    assert result.code == 0, result.err
    row = r"^a1\s+[\d:-]+(?: [\d:]+)?\s+2\s+\d\s+default\s+127\.0\.0\.1\s+yes"
    assert re.search(row, result.out, re.MULTILINE), result.out
    # other tests of the package may register agents of their own (test_agent_tokens.py)
    listed = {agent["id"]: agent for agent in json.loads(cli("agent", "list", "--json").out)}
    assert listed["a1"]["id"] == "a1"
    # the agent's own --master option also names the master to list
    via_option = cli("agent", "--master", cli.url, "list", master=False)
    assert via_option.code == 0, via_option.err
    assert "a1" in via_option.out


def test_slot_list(cli: Cli) -> None:
    result = cli("slot", "list")
    assert result.code == 0, result.err
    assert len(re.findall(r"^a1\s+[01]\s+yes\s+CPU", result.out, re.MULTILINE)) == 2
    rows = json.loads(cli("slot", "list", "--json").out)
    assert sorted(row["slotId"] for row in rows) == ["0", "1"]


def test_master_info_and_config(cli: Cli) -> None:
    info = cli("master", "info")
    assert info.code == 0, info.err
    assert f"Master: {cli.url}" in info.out
    assert "Determined wire version: 0.38.1" in info.out
    assert json.loads(cli("master", "info", "--json").out)["version"] == "0.38.1"
    config = yaml.safe_load(cli("master", "config").out)
    assert config["checkpoint_storage"]["type"] == "shared_fs"
    assert "initial_user_password" not in config.get("security", {})
    port = int(cli.url.rsplit(":", 1)[1])
    assert json.loads(cli("master", "config", "--json").out)["port"] == port


def test_master_config_needs_an_admin(cli: Cli) -> None:
    result = cli("-u", "determined", "master", "config")
    assert result.code == 1
    one_error_line(result.err)
