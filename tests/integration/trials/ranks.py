"""Each container of a multi-container trial prints what it was given, then exits 0."""

import json
import os
import pathlib
import time

info = pathlib.Path(os.environ["DET_RUN_DIR"]) / "info" / "rendezvous.json"
rendezvous = json.loads(info.read_text())
print(
    "container rank={} of {} on agent {} slots {} addrs {}".format(
        rendezvous["container_rank"],
        len(rendezvous["container_addrs"]),
        os.environ["DET_AGENT_ID"],
        os.environ["DET_SLOT_IDS"],
        ",".join(rendezvous["container_addrs"]),
    ),
    flush=True,
)
time.sleep(0.5)
