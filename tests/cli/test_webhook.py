"""``stalwart webhook create/list/test/deliveries/delete`` against a real master and agent."""

from __future__ import annotations

import json
import re

from stalwart.client import Client
from tests.cli.conftest import Cli, one_error_line
from tests.webhook_receiver import receiver


def test_webhook_commands(cli: Cli, admin: Client) -> None:
    with receiver() as hooks:
        made = cli(
            "webhook", "create", hooks.url("cli"), "--state", "COMPLETED", "--name", "cli-hook"
        )
        assert made.code == 0, made.err
        found = re.search(r"Created webhook (\d+)", made.out)
        assert found, made.out
        webhook_id = found.group(1)
        listed = cli("webhook", "list")
        assert listed.code == 0, listed.err
        assert "cli-hook" in listed.out
        assert "global" in listed.out
        as_json = json.loads(cli("webhook", "list", "--json").out)
        (row,) = [w for w in as_json if str(w["id"]) == webhook_id]
        assert row["triggers"] == [
            {"trigger_type": "EXPERIMENT_STATE_CHANGE", "state": "COMPLETED", "regex": None}
        ]
        tested = cli("webhook", "test", webhook_id)
        assert tested.code == 0, tested.err
        assert f"Webhook {webhook_id} took the test event" in tested.out
        hooks.wait("cli")
        shown = cli("webhook", "deliveries", webhook_id)
        assert shown.code == 0, shown.err
        hooks.plan("cli", 503)
        failed = cli("webhook", "test", webhook_id)
        assert failed.code != 0
        assert "answered 503" in one_error_line(failed.err)
    deleted = cli("webhook", "delete", webhook_id)
    assert deleted.code == 0, deleted.err
    assert webhook_id not in {str(w.id) for w in admin.list_webhooks()}
    refused = cli("webhook", "create", "not-a-url", "--state", "COMPLETED")
    assert refused.code != 0
    assert "valid url required" in one_error_line(refused.err)
