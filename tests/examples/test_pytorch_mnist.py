"""The PyTorch example (``examples/pytorch_mnist``): its data, and its three configs on a cluster
with a few batches each; off-cluster, its training function with the local Core API.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import stalwart as det
from stalwart.client import Client
from tests.examples.conftest import (
    EXAMPLES,
    completed,
    example_config,
    metric_steps,
    trial_log,
    validation_metrics,
)
from tests.launch.conftest import require_torch

MNIST = EXAMPLES / "pytorch_mnist"
TINY = {"hyperparameters.train_batches": 4, "hyperparameters.validation_period": 2}
"""Four batches, with a validation and a checkpoint every two."""


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """The example's modules (``data``, ``model``, ``train``), imported as ``train.py`` imports
    them, and forgotten afterwards (the names are common)."""
    require_torch()
    monkeypatch.syspath_prepend(str(MNIST))
    names = ("data", "model", "train")
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    try:
        yield {name: importlib.import_module(name) for name in names}
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def test_the_data_is_made_the_same_every_time(example: dict[str, ModuleType]) -> None:
    make_digits = example["data"].make_digits
    images, labels = make_digits(200, seed=0)
    assert tuple(images.shape) == (200, 1, 28, 28)
    assert tuple(labels.shape) == (200,)
    assert set(labels.tolist()) == set(range(10))
    again, same_labels = make_digits(200, seed=0)
    assert bool((images == again).all())
    assert bool((labels == same_labels).all())
    other, _ = make_digits(200, seed=1)
    assert not bool((images == other).all())
    assert abs(float(images.mean())) < 0.2
    assert 0.8 < float(images.std()) < 1.2


def _hparams(example: dict[str, ModuleType], **changes: Any) -> dict[str, Any]:
    hparams: dict[str, Any] = dict(example["train"].DEFAULT_HPARAMS)
    return hparams | changes


def test_training_off_cluster_checkpoints_and_resumes(
    example: dict[str, ModuleType], tmp_path: Path
) -> None:
    """``train()`` with the off-cluster Core API: metrics, a checkpoint at each validation, and
    a second run that resumes from the last checkpoint instead of starting over."""
    import torch

    train = example["train"].train
    cpu = torch.device("cpu")
    hparams = _hparams(example, train_batches=4, validation_period=2)
    with det.core.init(checkpoint_storage=tmp_path) as core_context:
        train(core_context, hparams, None, cpu)
        assert isinstance(core_context.train, det.core.LocalTrainContext)
        reports = core_context.train.reports
    assert [(r.group, r.steps_completed) for r in reports] == [
        ("validation", 2),
        ("training", 4),
        ("validation", 4),
    ]
    assert set(reports[-1].metrics) == {"validation_loss", "accuracy", "batches"}
    saved = {
        json.loads((path.parent / "metadata.json").read_text())["steps_completed"]: path.parent
        for path in tmp_path.glob("*/checkpoint.pt")
    }
    assert sorted(saved) == [2, 4]

    hparams = _hparams(example, train_batches=6, validation_period=2)
    with det.core.init(checkpoint_storage=tmp_path) as core_context:
        train(core_context, hparams, saved[4].name, cpu)
        assert isinstance(core_context.train, det.core.LocalTrainContext)
        reports = core_context.train.reports
    assert [(r.group, r.steps_completed) for r in reports] == [
        ("training", 6),
        ("validation", 6),
    ]


def test_const_on_a_cluster(client: Client) -> None:
    require_torch()
    exp = client.create_experiment(example_config(MNIST / "const.yaml", TINY), MNIST)
    (trial,) = completed(exp)
    assert metric_steps(trial, "validation") == [2, 4]
    assert metric_steps(trial, "training") == [4]
    last = validation_metrics(trial)[-1]
    assert last["batches"] == 4
    assert 0.0 <= last["accuracy"] <= 1.0
    assert {c.steps_completed for c in trial.checkpoints()} >= {4}


def test_adaptive_on_a_cluster(client: Client) -> None:
    require_torch()
    overrides = {**TINY, "searcher.max_time": 4, "searcher.max_trials": 2}
    exp = client.create_experiment(example_config(MNIST / "adaptive.yaml", overrides), MNIST)
    trials = completed(exp, timeout=180)
    assert len(trials) == 2
    for trial in trials:
        assert trial.state == "COMPLETED"
        assert validation_metrics(trial), trial_log(trial)
    assert exp.reload().data.best_trial_id in {t.id for t in trials}


def test_distributed_on_a_cluster(client: Client) -> None:
    """Two workers (DDP over gloo on CPU): the chief reports the metrics of both, and each
    worker's own lines (its start) reach the trial's log with its rank."""
    require_torch()
    exp = client.create_experiment(example_config(MNIST / "distributed.yaml", TINY), MNIST)
    (trial,) = completed(exp)
    assert metric_steps(trial, "validation") == [2, 4]
    assert metric_steps(trial, "training") == [4]
    ranks = {line.rank_id for line in trial.logs() if line.rank_id is not None}
    assert ranks == {0, 1}
