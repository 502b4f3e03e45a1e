"""Run calls of the official 0.38.1 client's generated ``bindings`` over its own logged-in
session, exactly as the web UI's and users' scripts send them, and print what the client
parsed.

Run with the det venv's Python: ``python bindings_calls.py MASTER USER PASSWORD CALLS`` where
CALLS is a JSON list of ``{"fn": "post_ActivateExperiments", "kwargs": {...}, "body": {"type":
"v1ActivateExperimentsRequest", "json": {...}}}`` (``body`` optional; ``enums`` optional:
``{"kwarg": "v1MetricType"}`` turns a kwarg's string into that enum; ``take`` optional: read
only the first N results of a stream, which then is closed). Prints one line
``CALLS_RESULT <json list>``: per call ``{"ok": <the parsed answer's to_json(), a list for a
stream>}`` or ``{"status": <HTTP status>, "error": <message>}`` when the client raised.
"""

import itertools
import json
import sys
import types
from typing import Any

from determined.common import api  # type: ignore[import-not-found]
from determined.common.api import bindings  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def _plain(value: Any, take: Any = None) -> Any:
    if isinstance(value, types.GeneratorType):
        items = [_plain(v) for v in itertools.islice(value, take)]
        value.close()
        return items
    if hasattr(value, "to_json"):
        return value.to_json(True)
    return value


def call(session: Any, spec: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(spec.get("kwargs", {}))
    for name, enum in spec.get("enums", {}).items():
        kwargs[name] = getattr(bindings, enum)(kwargs[name])
    body = spec.get("body")
    if body is not None:
        kwargs["body"] = getattr(bindings, body["type"]).from_json(body["json"])
    try:
        return {"ok": _plain(getattr(bindings, spec["fn"])(session, **kwargs), spec.get("take"))}
    except (api.errors.APIException, api.errors.ForbiddenException) as exc:
        return {"status": getattr(exc, "status_code", 403), "error": str(exc)}


def main() -> int:
    master, user, password, calls = sys.argv[1:]
    client.login(master=master, user=user, password=password)
    session = client._determined._session
    results = [call(session, spec) for spec in json.loads(calls)]
    print("CALLS_RESULT " + json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
