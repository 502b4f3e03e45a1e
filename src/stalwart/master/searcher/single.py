"""The ``single`` searcher: one trial.

As Determined (a random search with ``max_trials: 1``, one at a time): the hyperparameters are
sampled once (constants as given, ranges drawn with the experiment seed). A trial that reports
invalid hyperparameters is not replaced; the experiment then ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.random_search import RandomSearch

__all__ = ["SingleSearch"]


class SingleSearch(RandomSearch):
    """Exactly one trial."""

    name = "single"
    replaces_invalid = False

    def __init__(self, hyperparameters: Mapping[str, Hyperparameter], seed: int) -> None:
        super().__init__(hyperparameters, seed, max_trials=1, max_concurrent_trials=1)
