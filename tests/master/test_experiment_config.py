"""The typed experiment config: parsed once, never stale after an edit, a clear error when the
stored config no longer validates."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.config import ExperimentConfig
from stalwart.environments.prepull import experiment_image
from stalwart.errors import StoredConfigError
from stalwart.master.db.tables import Experiment
from stalwart.master.services import experiment_config
from stalwart.master.services.experiment_config import (
    clear_cache,
    typed_config,
    typed_config_of,
)
from stalwart.master.services.experiment_create import defaulted_config
from stalwart.master.services.experiments import ExperimentPatch, patch_experiment
from stalwart.master.services.prepull import queued_experiment_images
from stalwart.master.state import MasterState
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import CONFIG as SINGLE
from tests.master.test_experiment_create import create

CONFIG = SINGLE + "max_restarts: 3\n"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def stored(tmp_path: Path) -> dict[str, Any]:
    """A stored config as creation writes it (defaulted, JSON round-tripped)."""
    config, _ = defaulted_config(CONFIG, make_settings(tmp_path / "home"), archive=None)
    loaded: dict[str, Any] = json.loads(json.dumps(config))
    return loaded


@pytest.fixture
def count_validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = ExperimentConfig.model_validate

    def counting(data: Any, *args: Any, **kwargs: Any) -> ExperimentConfig:
        calls.append(1)
        return real(data, *args, **kwargs)

    monkeypatch.setattr(ExperimentConfig, "model_validate", counting)
    return calls


def test_a_stored_config_is_parsed_once(
    stored: dict[str, Any], count_validations: list[int]
) -> None:
    experiment = Experiment(id=7, config=stored)
    first = typed_config(experiment)
    assert first.max_restarts == 3
    assert first.searcher.metric == "loss"
    # The same stored config, read again from the row or as a fresh copy of the column.
    assert typed_config(experiment) is first
    assert typed_config_of(7, json.loads(json.dumps(stored))) is first
    assert len(count_validations) == 1


def test_an_edited_config_is_parsed_again(
    stored: dict[str, Any], count_validations: list[int]
) -> None:
    experiment = Experiment(id=7, config=stored)
    assert typed_config(experiment).max_restarts == 3
    experiment.config = {**stored, "max_restarts": 9}
    assert typed_config(experiment).max_restarts == 9
    # An in-place change of the dict is seen too.
    experiment.config["max_restarts"] = 4
    assert typed_config(experiment).max_restarts == 4
    assert len(count_validations) == 3
    # Another experiment with the same id (another master's database) gets its own config.
    assert typed_config_of(7, stored).max_restarts == 3


def test_a_patched_experiment_is_never_served_stale(
    client: TestClient, admin: dict[str, str]
) -> None:
    resp = create(client, admin)
    assert resp.status_code == 200, resp.text
    experiment_id = resp.json()["experiment"]["id"]
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    with state.sessions() as session:
        experiment = session.get(Experiment, experiment_id)
        assert experiment is not None
        before = typed_config(experiment)
        assert before.resources.priority is None
        assert typed_config(experiment) is before
    with state.sessions() as session:
        patch_experiment(session, experiment_id, ExperimentPatch(priority=7, name="renamed"))
    with state.sessions() as session:
        experiment = session.get(Experiment, experiment_id)
        assert experiment is not None
        after = typed_config(experiment)
        assert after.resources.priority == 7
        assert after.name == "renamed"
        assert typed_config(experiment) is after


def test_an_invalid_stored_config_raises_a_clear_error(stored: dict[str, Any]) -> None:
    bad = {**stored, "max_restarts": -1, "no_such_key": True}
    with pytest.raises(StoredConfigError) as info:
        typed_config(Experiment(id=3, config=bad))
    err = info.value
    assert err.code == "invalid_stored_config"
    assert err.experiment_id == 3
    assert "experiment 3" in err.message
    assert any("max_restarts" in p for p in err.problems)
    assert any("no_such_key" in p for p in err.problems)
    # Failures are not cached: the repaired config is served.
    assert typed_config(Experiment(id=3, config=stored)).max_restarts == 3


def test_an_unsaved_experiment_is_validated_but_not_cached(
    stored: dict[str, Any], count_validations: list[int]
) -> None:
    experiment = Experiment(config=stored)
    assert typed_config(experiment).max_restarts == 3
    assert typed_config(experiment).max_restarts == 3
    assert len(count_validations) == 2


def test_the_cache_is_bounded(
    stored: dict[str, Any], monkeypatch: pytest.MonkeyPatch, count_validations: list[int]
) -> None:
    monkeypatch.setattr(experiment_config, "CACHE_SIZE", 2)
    for experiment_id in (1, 2, 3):
        typed_config_of(experiment_id, stored)
    typed_config_of(3, stored)  # still cached
    assert len(count_validations) == 3
    typed_config_of(1, stored)  # evicted: parsed again
    assert len(count_validations) == 4


def test_concurrent_readers_share_one_object(stored: dict[str, Any]) -> None:
    results: list[ExperimentConfig] = []
    lock = threading.Lock()

    def read() -> None:
        for _ in range(50):
            typed = typed_config_of(11, stored)
            with lock:
                results.append(typed)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 400
    assert len({id(r) for r in results}) == 1


@pytest.mark.parametrize("slots", [0, 1])
def test_typed_and_stored_configs_name_the_same_images(stored: dict[str, Any], slots: int) -> None:
    stored["resources"]["slots_per_trial"] = slots
    stored["environment"]["image"]["cuda"] = "repo/cuda:1"
    typed = typed_config_of(5, stored)
    for device in ("cpu", "cuda", "rocm"):
        assert experiment_image(typed, device) == experiment_image(stored, device)


def test_the_prepull_plan_and_listing_survive_an_invalid_stored_config(
    client: TestClient, admin: dict[str, str]
) -> None:
    ids = []
    for _ in range(2):
        resp = create(client, admin)
        assert resp.status_code == 200, resp.text
        ids.append(resp.json()["experiment"]["id"])
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    with state.sessions() as session:
        broken = session.get(Experiment, ids[0])
        assert broken is not None
        config = json.loads(json.dumps(broken.config))
        config["environment"]["image"]["cpu"] = "repo/broken:1"
        broken.config = {**config, "no_such_key": 1}
        session.commit()
    with state.sessions() as session:
        with pytest.raises(StoredConfigError):
            typed_config(session.get(Experiment, ids[0]))  # type: ignore[arg-type]
        found = dict(zip(ids, queued_experiment_images(session), strict=True))
    assert isinstance(found[ids[1]].config, ExperimentConfig)
    assert experiment_image(found[ids[0]].config, "cpu") == "repo/broken:1"
    # Nor does the experiment listing fail (it reads smaller_is_better of every experiment).
    listed = client.get("/api/v1/experiments?showTrialData=true", headers=admin)
    assert listed.status_code == 200, listed.text
    assert {e["id"] for e in listed.json()["experiments"]} == set(ids)
