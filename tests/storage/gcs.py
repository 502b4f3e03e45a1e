"""A real GCS emulator for tests: gcp-storage-emulator (PyPI) on a loopback port.

:func:`running_gcs_server` runs its HTTP server in a thread of the test process, in memory;
tests make a bucket each (:meth:`GCSServer.new_bucket`). The storage code reaches it as it
reaches Google: gcsfs over HTTP, pointed there as Google's SDKs are, by
``STORAGE_EMULATOR_HOST`` (or ``gcs_storage(emulator_host=)``), without credentials.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stalwart.storage import FsspecStorage, gcs_storage
from tests.storage.s3 import FAST
from tests.storage.services import require_module


@dataclass
class GCSServer:
    """A running gcp-storage-emulator."""

    endpoint_url: str
    server: Any

    def new_bucket(self) -> str:
        """A new, empty bucket."""
        name = f"b-{uuid.uuid4().hex[:16]}"
        self.client().mkdir(name)
        return name

    def client(self) -> Any:
        """A plain gcsfs file system on the emulator (to look at what the storage wrote)."""
        import gcsfs.core  # type: ignore[import-untyped]

        return gcsfs.core.GCSFileSystem(
            endpoint_url=self.endpoint_url, token="anon", project="test", skip_instance_cache=True
        )

    def storage(self, bucket: str, prefix: str | None = "ckpts") -> FsspecStorage:
        return gcs_storage(bucket, prefix, emulator_host=self.endpoint_url, retry=FAST)

    def config(self, bucket: str, prefix: str = "ckpts") -> dict[str, Any]:
        """The ``checkpoint_storage`` config of this emulator's bucket (it is reached only with
        ``STORAGE_EMULATOR_HOST`` set to :attr:`endpoint_url`)."""
        return {"type": "gcs", "bucket": bucket, "prefix": prefix}


@contextlib.contextmanager
def running_gcs_server() -> Iterator[GCSServer]:
    """gcp-storage-emulator until the block ends (skipped when it is missing, except under
    CI=true)."""
    emulator = require_module("gcp_storage_emulator.server", "the GCS emulator")
    require_module("gcsfs", "the GCS storage")
    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)  # a line per request
    server = emulator.create_server("127.0.0.1", 0, in_memory=True)
    server._api.daemon = True  # its thread must never keep the test process alive
    server.start()
    host, port = server._api._httpd.server_address[:2]
    try:
        yield GCSServer(endpoint_url=f"http://{host}:{port}", server=server)
    finally:
        server.stop()
