"""A real S3-compatible server for tests: moto's server mode on a loopback port.

:func:`running_s3_server` runs one in a thread of the test process; tests make a bucket each
(:meth:`S3Server.new_bucket`), so they never see each other's objects. Nothing in fsspec or
s3fs is patched: the storage code talks HTTP to the server as it talks to AWS.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stalwart.storage import FsspecStorage, RetrySettings, s3_storage
from tests.storage.services import require_module

FAST = RetrySettings(attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05)
"""Short waits between retries, so failing tests fail fast."""


@dataclass
class S3Server:
    """A running moto S3 server."""

    endpoint_url: str
    server: Any

    def new_bucket(self) -> str:
        """A new, empty bucket."""
        name = f"b-{uuid.uuid4().hex[:16]}"
        self.client().mkdir(name)
        return name

    def client(self) -> Any:
        """A plain s3fs file system on the server (to look at what the storage wrote)."""
        import s3fs  # type: ignore[import-untyped]

        return s3fs.S3FileSystem(
            key="testing",
            secret="testing",
            endpoint_url=self.endpoint_url,
            skip_instance_cache=True,
        )

    def storage(self, bucket: str, prefix: str | None = "ckpts") -> FsspecStorage:
        return s3_storage(
            bucket,
            prefix,
            endpoint_url=self.endpoint_url,
            access_key="testing",
            secret_key="testing",
            retry=FAST,
        )

    def config(self, bucket: str, prefix: str = "ckpts") -> dict[str, Any]:
        """The ``checkpoint_storage`` config of this server's bucket."""
        return {
            "type": "s3",
            "bucket": bucket,
            "prefix": prefix,
            "endpoint_url": self.endpoint_url,
            "access_key": "testing",
            "secret_key": "testing",
        }


@contextlib.contextmanager
def running_s3_server() -> Iterator[S3Server]:
    """moto's S3 server until the block ends (skipped when moto is missing, except under
    CI=true)."""
    moto_server = require_module("moto.server", "the S3 server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(endpoint_url=f"http://{host}:{port}", server=server)
    finally:
        server.stop()
