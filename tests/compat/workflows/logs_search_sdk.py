"""``logs_search_sdk.py MASTER TRIAL_ID TEXT``: the lines of the trial that hold TEXT, through
the official 0.38.1 client's ``determined.common.api.logs.trial_logs(search_text=...)`` (no
``det`` flag sends ``searchText``), run with the det venv's Python as ``admin``.

Prints one line ``SDK_RESULT <json list of the lines that start with MARK>``.
"""

import json
import sys

from determined.common import api  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def main(master: str, trial_id: int, text: str) -> list[str]:
    client.login(master=master, user="admin", password="")
    sess = client._determined._session  # the SDK's own authenticated session
    lines = [entry.log or "" for entry in api.trial_logs(sess, trial_id, search_text=text)]
    return [line for line in lines if line.startswith("MARK")]


if __name__ == "__main__":
    found = main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    print("SDK_RESULT " + json.dumps(found), flush=True)
