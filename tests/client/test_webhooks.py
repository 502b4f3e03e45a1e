"""The SDK's webhook methods against a real master, with a real receiver on loopback."""

from __future__ import annotations

import json

import pytest

from stalwart.client import Client
from stalwart.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tests.webhook_receiver import receiver


def test_create_list_test_deliveries_delete(admin: Client) -> None:
    with receiver() as hooks:
        made = admin.create_webhook(
            hooks.url("sdk"), name="sdk", states=["completed"], log_regexes=["Traceback"]
        )
        assert (made.name, made.webhook_type, made.mode, made.workspace_id) == (
            "sdk",
            "DEFAULT",
            "WORKSPACE",
            None,
        )
        assert [(t.trigger_type, t.condition) for t in made.triggers] == [
            ("EXPERIMENT_STATE_CHANGE", "state=COMPLETED"),
            ("TASK_LOG", "regex=Traceback"),
        ]
        assert made.id in {w.id for w in admin.list_webhooks()}
        admin.test_webhook(made.id)
        (post,) = hooks.wait("sdk")
        assert json.loads(post.body)["event_data"] == {"data": "test"}
        assert admin.webhook_deliveries(made.id) == []  # a test event is not an event
        hooks.plan("sdk", 500)
        with pytest.raises(FailedPreconditionError, match="answered 500"):
            admin.test_webhook(made.id)
    admin.delete_webhook(made.id)
    assert made.id not in {w.id for w in admin.list_webhooks()}
    with pytest.raises(NotFoundError):
        admin.delete_webhook(made.id)


def test_refusals_are_the_masters_errors(admin: Client) -> None:
    with pytest.raises(InvalidArgumentError, match="at least one trigger"):
        admin.create_webhook("http://127.0.0.1:9/x")
    with pytest.raises(InvalidArgumentError, match="invalid regex"):
        admin.create_webhook("http://127.0.0.1:9/x", log_regexes=["("])
