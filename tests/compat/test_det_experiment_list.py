"""The experiment list through the official 0.38.1 client: ``det experiment list`` (which
ignores the list's ETags), ``bindings.get_GetExperiments`` sorted and paged with Determined's
``sortBy``/``orderBy``, and ``bindings.post_SearchExperiments`` sorted by a hyperparameter and
filtered with the web UI's filter JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.compat.conftest import Det, MasterProcess, logged_in_admin
from tests.compat.test_det_bulk_actions import calls
from tests.compat.test_det_workflows import WORKFLOWS, _created_id

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


@pytest.fixture(scope="module")
def experiments(admin: Det, tmp_path_factory: pytest.TempPathFactory) -> dict[float, int]:
    """Three paused experiments, ``{their lr: id}``."""
    model = tmp_path_factory.mktemp("list-model")
    (model / "trial.py").write_text((WORKFLOWS / "trial.py").read_text(), encoding="utf-8")
    made = {}
    for lr in (0.1, 0.001, 0.01):
        config = model.parent / f"list-{lr}.yaml"
        config.write_text(
            f"name: list-{lr}\nentrypoint: python3 trial.py\n"
            f"hyperparameters:\n  lr: {lr}\n  steps: 1\n  sleep: 0\n"
            "searcher:\n  name: single\n  metric: loss\n  max_length: 1\n",
            encoding="utf-8",
        )
        made[lr] = _created_id(
            admin.ok("experiment", "create", "--paused", str(config), str(model))
        )
    return made


def test_det_experiment_list_shows_every_experiment(
    admin: Det, experiments: dict[float, int]
) -> None:
    listed = admin.ok("experiment", "list", "--all").stdout
    for exp_id in experiments.values():
        assert re.search(rf"^\s*{exp_id} \|.*\| PAUSED ", listed, re.M), listed
    csv = admin.ok("experiment", "list", "--all", "--csv").stdout
    assert {str(i) for i in experiments.values()} <= {
        line.split(",")[0] for line in csv.splitlines()[1:]
    }


def test_official_bindings_sort_page_and_filter(admin: Det, experiments: dict[float, int]) -> None:
    ids = sorted(experiments.values())
    only_these = json.dumps(
        {
            "filterGroup": {
                "kind": "group",
                "conjunction": "and",
                "children": [
                    {
                        "kind": "field",
                        "columnName": "name",
                        "operator": "contains",
                        "value": "list-",
                    }
                ],
            },
            "showArchived": True,
        }
    )
    paged, by_lr, filtered = calls(
        admin,
        {
            "fn": "get_GetExperiments",
            "kwargs": {
                "sortBy": "SORT_BY_ID",
                "orderBy": "ORDER_BY_DESC",
                "offset": 1,
                "limit": 2,
                "experimentIdFilter_incl": ids,
            },
            "enums": {"sortBy": "v1GetExperimentsRequestSortBy", "orderBy": "v1OrderBy"},
        },
        {
            "fn": "post_SearchExperiments",
            "body": {
                "type": "v1SearchExperimentsRequest",
                "json": {"sort": "hp.lr=desc", "filter": only_these},
            },
        },
        {
            "fn": "post_SearchExperiments",
            "body": {
                "type": "v1SearchExperimentsRequest",
                "json": {"sort": "hp.lr=asc", "filter": only_these, "offset": 1, "limit": 1},
            },
        },
    )
    assert [e["id"] for e in paged["ok"]["experiments"]] == [ids[1], ids[0]], paged
    assert paged["ok"]["pagination"]["total"] == 3
    assert [e["experiment"]["id"] for e in by_lr["ok"]["experiments"]] == [
        experiments[0.1],
        experiments[0.01],
        experiments[0.001],
    ]
    assert [e["experiment"]["id"] for e in filtered["ok"]["experiments"]] == [experiments[0.01]]
    assert filtered["ok"]["pagination"]["total"] == 3
