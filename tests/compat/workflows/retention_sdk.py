"""Log retention calls of the official 0.38.1 client that no ``det`` command makes (the web UI's
and scripts' ``bindings``), run with the det venv's Python as ``admin``:

- ``retention_sdk.py MASTER remaining TRIAL_ID``: ``get_GetTrialRemainingLogRetentionDays``;
- ``retention_sdk.py MASTER bulk PROJECT_ID DAYS EXP_ID...``: ``put_PutExperimentsRetainLogs``.

Prints one line ``SDK_RESULT <json>``; any failure is a traceback and a non-zero exit.
"""

import json
import sys
from typing import Any

from determined.common.api import bindings  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def main(master: str, op: str, args: list[str]) -> Any:
    client.login(master=master, user="admin", password="")
    sess = client._determined._session  # the SDK's own authenticated session
    if op == "remaining":
        resp = bindings.get_GetTrialRemainingLogRetentionDays(sess, id=int(args[0]))
        return {"remainingDays": resp.remainingDays}
    if op == "bulk":
        project, days, *exps = (int(a) for a in args)
        body = bindings.v1PutExperimentsRetainLogsRequest(
            experimentIds=exps, numDays=days, projectId=project
        )
        resp = bindings.put_PutExperimentsRetainLogs(sess, body=body, projectId=project)
        return [{"id": r.id, "error": r.error} for r in resp.results]
    raise SystemExit(f"unknown operation {op}")


if __name__ == "__main__":
    print("SDK_RESULT " + json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3:])), flush=True)
