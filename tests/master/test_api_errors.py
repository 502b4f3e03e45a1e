"""The master's answer when its database connection pool is exhausted (a load peak): 503, which
the Core API client and the agent retry, never a 500 that drops a metrics batch."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from stalwart.master.api.errors import install_error_handlers


def test_pool_exhaustion_is_503_unavailable() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/busy")
    def busy() -> None:
        raise PoolTimeoutError("QueuePool limit of size 8 overflow 10 reached")

    with TestClient(app) as client:
        response = client.post("/busy")
    assert response.status_code == 503
    assert response.json()["error"]["reason"] == "Unavailable"
    assert "retry" in response.json()["message"]
