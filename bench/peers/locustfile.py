"""B3's load: users of the CLI and the web UI reading from a seeded Stalwart master (locust).

Runs in the peers' virtual environment (``.cache/bench-peers``, where locust is installed);
``bench/b3.py`` starts ``locust -f bench/peers/locustfile.py --headless`` with ``B3_TARGETS``
naming a JSON file ``{"experiments": [ids], "trials": [ids], "big_trial": id,
"big_experiment": id, "tokens": [...]}``. Each simulated user signs in with one of ``tokens``
(made by ``bench/b3.py``, so password hashing stays out of the figures; without them it logs in
as ``admin`` once), then repeatedly picks
one of the read requests below (weights in ``@task``) and waits 0.5-1.5 s between requests, as
a person clicking through the UI or running ``det`` commands does. Each request is reported
under a fixed name (ids replaced by ``{id}``), so the statistics are per endpoint.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from locust import HttpUser, between  # type: ignore[import-not-found]
from locust import task as _locust_task

Method = Callable[..., None]


def task(weight: int) -> Callable[[Method], Method]:
    """locust's ``@task(weight)``, typed."""
    decorator: Callable[[Method], Method] = _locust_task(weight)
    return decorator


_TARGETS: dict[str, Any] = json.loads(Path(os.environ["B3_TARGETS"]).read_text(encoding="utf-8"))
_USERS = itertools.count()
"""Numbers the users as they start (each takes its own token)."""


class CliAndUiUser(HttpUser):  # type: ignore[misc]
    """One person using the UI and the CLI (read requests only)."""

    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        tokens = _TARGETS.get("tokens") or []
        if tokens:  # signed in beforehand (bench/b3.py): logins stay out of the figures
            token = tokens[next(_USERS) % len(tokens)]
        else:
            response = self.client.post(
                "/api/v1/auth/login", json={"username": "admin", "password": ""}, name="login"
            )
            response.raise_for_status()
            token = response.json()["token"]
        self.client.headers["Authorization"] = f"Bearer {token}"

    def _get(self, path: str, name: str) -> None:
        self.client.get("/api/v1" + path, name=name)

    @property
    def _experiment(self) -> int:
        return int(random.choice(_TARGETS["experiments"]))

    @property
    def _trial(self) -> int:
        return int(random.choice(_TARGETS["trials"]))

    @task(4)
    def experiments_page(self) -> None:
        offset = random.randrange(0, 100, 20)
        self._get(
            f"/experiments?limit=20&offset={offset}&sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC",
            "/experiments?limit=20",
        )

    @task(3)
    def experiment(self) -> None:
        self._get(f"/experiments/{self._experiment}", "/experiments/{id}")

    @task(3)
    def experiment_trials(self) -> None:
        self._get(f"/experiments/{self._experiment}/trials?limit=1000", "/experiments/{id}/trials")

    @task(1)
    def experiment_checkpoints(self) -> None:
        self._get(
            f"/experiments/{self._experiment}/checkpoints"
            "?sortByAttr=SORT_BY_END_TIME&orderBy=ORDER_BY_DESC&limit=100",
            "/experiments/{id}/checkpoints",
        )

    @task(2)
    def experiment_chart(self) -> None:
        big = _TARGETS["big_experiment"]
        self._get(f"/ui/experiments/{big}/metric-names", "/ui/experiments/{id}/metric-names")
        self._get(
            f"/ui/experiments/{big}/series?metric=validation_loss&group=validation",
            "/ui/experiments/{id}/series",
        )

    @task(3)
    def trial(self) -> None:
        self._get(f"/trials/{self._trial}", "/trials/{id}")

    @task(2)
    def trial_chart(self) -> None:
        big = _TARGETS["big_trial"]
        self._get(f"/ui/trials/{big}/metric-names", "/ui/trials/{id}/metric-names")
        self._get(
            f"/trials/{big}/metrics/series?metric=loss&group=training&maxPoints=1000",
            "/trials/{id}/metrics/series",
        )

    @task(1)
    def trial_metrics(self) -> None:
        big = _TARGETS["big_trial"]
        self._get(
            f"/trials/metrics/trial_metrics?trialIds={big}&group=training",
            "/trials/metrics/trial_metrics (1,800 reports)",
        )

    @task(1)
    def trial_checkpoints(self) -> None:
        self._get(
            f"/trials/{self._trial}/checkpoints"
            "?sortByAttr=SORT_BY_BATCH_NUMBER&orderBy=ORDER_BY_DESC&limit=100",
            "/trials/{id}/checkpoints",
        )

    @task(1)
    def cluster(self) -> None:
        self._get("/agents", "/agents")
        self._get("/resource-pools", "/resource-pools")
        self._get("/tasks", "/tasks")
        self._get("/master", "/master")
