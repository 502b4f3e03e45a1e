"""``GET /api/v1/resource-pools`` through the official 0.38.1 bindings (what ``det job list``
and the SDK read first).

Run with the det venv's Python: ``python resource_pools.py MASTER_URL``. It logs in as ``admin``,
parses the response with ``bindings.get_GetResourcePools`` (which raises on any missing REQUIRED
field or unknown enum value), checks ``determined.cli.job.check_is_priority`` on the default
pool, and prints ``POOLS_RESULT <json>``: each pool's name, default flag, agents, slots, slot
type and scheduler type.
"""

import json
import sys
from typing import Any

from determined.cli import job  # type: ignore[import-not-found]
from determined.common.api import bindings  # type: ignore[import-not-found]
from determined.experimental import client  # type: ignore[import-not-found]


def main(master: str) -> dict[str, Any]:
    client.login(master=master, user="admin", password="")
    session = client._determined._session  # the SDK session
    resp = bindings.get_GetResourcePools(session)
    pools = [
        {
            "name": p.name,
            "default": p.defaultComputePool,
            "agents": p.numAgents,
            "slots": p.slotsAvailable,
            "used": p.slotsUsed,
            "slot_type": p.slotType.value,
            "scheduler": p.schedulerType.value,
        }
        for p in resp.resourcePools or []
    ]
    return {"pools": pools, "priority": job.check_is_priority(resp, None)}


if __name__ == "__main__":
    print("POOLS_RESULT " + json.dumps(main(sys.argv[1])), flush=True)
