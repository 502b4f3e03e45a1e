"""Webhook calls exactly as the official 0.38.1 client library sends them (its generated
``bindings`` over its own session): 0.38.1's ``det`` has no webhook command.

Run with the det venv's Python: ``python webhooks_client.py MASTER USER PASSWORD ACTION [ARGS]``
where ACTION is ``create <json v1Webhook fields>``, ``list``, ``patch <id> <url>``,
``test <id>``, ``alert <experiment id> <trial id> <title> <description>`` or
``delete <id>``. Prints one line ``RESULT <json>``; a refused call prints
``REFUSED <exception class> <message>`` and exits 3.
"""

import json
import sys
from typing import Any

from determined.common import api  # type: ignore[import-not-found]
from determined.common.api import bindings  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def run(session: Any, action: str, args: list[str]) -> Any:
    if action == "create":
        fields = json.loads(args[0])
        body = bindings.v1Webhook(
            name=fields["name"],
            url=fields["url"],
            webhookType=bindings.v1WebhookType(fields.get("webhookType", "WEBHOOK_TYPE_DEFAULT")),
            mode=bindings.v1WebhookMode(fields.get("mode", "WEBHOOK_MODE_WORKSPACE")),
            workspaceId=fields.get("workspaceId"),
            triggers=[
                bindings.v1Trigger(
                    triggerType=bindings.v1TriggerType(t["triggerType"]),
                    condition=t["condition"],
                )
                for t in fields["triggers"]
            ],
        )
        return bindings.post_PostWebhook(session, body=body).webhook.to_json()
    if action == "list":
        return [w.to_json() for w in bindings.get_GetWebhooks(session).webhooks]
    if action == "patch":
        body = bindings.v1PatchWebhook(url=args[1])
        return bindings.patch_PatchWebhook(session, body=body, id=int(args[0]))
    if action == "test":
        return bindings.post_TestWebhook(session, id=int(args[0])).to_json()
    if action == "alert":  # what core_context.alert() sends from a trial
        body = bindings.v1PostWebhookEventDataRequest(
            data=bindings.v1CustomWebhookEventData(
                title=args[2], description=args[3], level=bindings.v1LogLevel.WARNING
            ),
            experimentId=int(args[0]),
            trialId=int(args[1]),
        )
        return bindings.post_PostWebhookEventData(session, body=body)
    if action == "delete":
        return bindings.delete_DeleteWebhook(session, id=int(args[0]))
    raise SystemExit(f"unknown action {action}")


def main() -> int:
    master, user, password, action, *args = sys.argv[1:]
    client.login(master=master, user=user, password=password)
    session = client._determined._session
    try:
        result = run(session, action, args)
    except api.errors.BadRequestException as exc:
        print(f"REFUSED {type(exc).__name__} {exc}", flush=True)
        return 3
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
