"""Master settings: file, STALWART_* environment and overrides, in that order of precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.errors import ConfigError
from stalwart.master.settings import load_settings


def test_precedence_and_nesting(tmp_path: Path) -> None:
    config = tmp_path / "master.yaml"
    config.write_text("port: 9000\ncluster:\n  agent_timeout: 30\n  kill_grace: 2\n")
    env = {"STALWART_PORT": "9100", "STALWART_CLUSTER__AGENT_TIMEOUT": "45"}
    settings = load_settings(config, environ=env, overrides={"port": 9200, "db": None})
    assert settings.port == 9200  # override > environment > file
    assert settings.cluster.agent_timeout == 45  # environment > file
    assert settings.cluster.kill_grace == 2  # file > default


def test_variables_of_the_cli_and_the_agent_are_not_the_masters(tmp_path: Path) -> None:
    env = {
        "STALWART_MASTER": "http://m:8080",
        "STALWART_AGENT_TOKEN": "secret",
        "STALWART_HOME": str(tmp_path),
    }
    settings = load_settings(None, environ=env)
    assert settings.home == tmp_path


def test_a_bad_value_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="agent_timeout"):
        load_settings(None, environ={"STALWART_CLUSTER__AGENT_TIMEOUT": "soon"})
