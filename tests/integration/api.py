"""A small REST client for the integration tests (the SDK comes with the CLI issue).

It speaks the master's public API exactly as users' tools do: log in, create experiments from
YAML and files, read experiments, trials, metrics and logs, and wait for states.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

__all__ = ["TERMINAL", "Api"]

TERMINAL = frozenset({"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"})


class Api:
    """A session against a running master (the built-in admin unless told otherwise)."""

    def __init__(self, url: str, username: str = "admin", password: str = "") -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30.0)
        token = self.http.post(
            "/api/v1/auth/login", json={"username": username, "password": password}
        )
        token.raise_for_status()
        self.http.headers["Authorization"] = f"Bearer {token.json()['token']}"

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        response = self.http.post(path, json=dict(body or {}))
        response.raise_for_status()
        return response.json()

    def create_experiment(
        self, config: str, files: Mapping[str, str], *, activate: bool = True
    ) -> int:
        """Create an experiment from YAML text and ``{path: text}`` files; its id."""
        model_def = [
            {"path": path, "type": 48, "content": base64.b64encode(text.encode()).decode()}
            for path, text in files.items()
        ]
        body = {"config": config, "modelDefinition": model_def, "activate": activate}
        return int(self.post("/api/v1/experiments", body)["experiment"]["id"])

    def experiment(self, experiment_id: int) -> dict[str, Any]:
        return dict(self.get(f"/api/v1/experiments/{experiment_id}")["experiment"])

    def trials(self, experiment_id: int) -> list[dict[str, Any]]:
        return list(self.get(f"/api/v1/experiments/{experiment_id}/trials", limit=1000)["trials"])

    def metrics(self, trial_id: int, group: str = "training") -> list[dict[str, Any]]:
        """Every report of ``group`` of a trial, in order."""
        kind = {"training": "training_metrics", "validation": "validation_metrics"}[group]
        response = self.http.get(f"/api/v1/trials/metrics/{kind}", params={"trialIds": trial_id})
        response.raise_for_status()
        out: list[dict[str, Any]] = []
        for line in response.text.splitlines():
            if line.strip():
                out.extend(json.loads(line)["result"]["metrics"])
        return out

    def logs(self, trial_id: int) -> str:
        """The trial's whole log text so far."""
        response = self.http.get(f"/api/v1/trials/{trial_id}/logs")
        response.raise_for_status()
        lines = [json.loads(line)["result"] for line in response.text.splitlines() if line]
        return "".join(entry.get("log") or entry.get("message", "") for entry in lines)

    def checkpoints(self, experiment_id: int) -> list[dict[str, Any]]:
        return list(self.get(f"/api/v1/experiments/{experiment_id}/checkpoints")["checkpoints"])

    def wait_until(
        self, check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.2
    ) -> Any:
        """Poll ``check()`` until it returns something truthy; its value."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")

    def wait_state(
        self, experiment_id: int, states: Iterable[str] = TERMINAL, *, timeout: float = 120.0
    ) -> dict[str, Any]:
        """Wait for the experiment to reach one of ``states``; the experiment."""
        wanted = set(states)

        def check() -> dict[str, Any] | None:
            exp = self.experiment(experiment_id)
            return exp if exp["state"] in wanted else None

        result: dict[str, Any] = self.wait_until(
            check, timeout=timeout, what=f"experiment {experiment_id} in {sorted(wanted)}"
        )
        return result
