"""Build the searcher an experiment config asks for."""

from __future__ import annotations

from stalwart.config import ExperimentConfig
from stalwart.config.searcher import (
    AdaptiveASHASearcher,
    AsyncHalvingSearcher,
    GridSearcher,
    RandomSearcher,
    SingleSearcher,
)
from stalwart.master.searcher.adaptive_asha import AdaptiveASHASearch
from stalwart.master.searcher.asha import AsyncHalvingSearch
from stalwart.master.searcher.base import SearchMethod
from stalwart.master.searcher.grid import GridSearch
from stalwart.master.searcher.random_search import RandomSearch
from stalwart.master.searcher.single import SingleSearch

__all__ = ["make_searcher", "searcher_class", "time_budget"]


def time_budget(searcher: AsyncHalvingSearcher | AdaptiveASHASearcher) -> tuple[str, int]:
    """``(time_metric, max_time)``; the legacy ``max_length`` gives its unit and value (a
    unitless integer counts batches)."""
    if searcher.time_metric is not None and searcher.max_time is not None:
        return searcher.time_metric, searcher.max_time
    if isinstance(searcher.max_length, int):
        return "batches", searcher.max_length
    if searcher.max_length is not None and searcher.max_length.value >= 1:
        return searcher.max_length.unit, searcher.max_length.value
    raise ValueError(
        f"{searcher.name} needs max_time and time_metric (or the legacy max_length >= 1)"
    )


def searcher_class(config: ExperimentConfig) -> type[SearchMethod]:
    """The kind of searcher :func:`make_searcher` builds for ``config`` (without building it)."""
    kinds: dict[type[object], type[SearchMethod]] = {
        SingleSearcher: SingleSearch,
        RandomSearcher: RandomSearch,
        GridSearcher: GridSearch,
        AsyncHalvingSearcher: AsyncHalvingSearch,
    }
    return kinds.get(type(config.searcher), AdaptiveASHASearch)


def make_searcher(config: ExperimentConfig, *, seed: int | None = None) -> SearchMethod:
    """A new searcher for ``config``, seeded with ``seed`` or the experiment seed.

    The master fills ``reproducibility.experiment_seed`` when it creates the experiment; a config
    without one (and no ``seed``) raises ValueError, as does an ASHA searcher without a length.
    """
    if seed is None:
        seed = config.reproducibility.experiment_seed
    if seed is None:
        raise ValueError("the experiment has no reproducibility.experiment_seed yet")
    hps = config.hyperparameters
    s = config.searcher
    if isinstance(s, SingleSearcher):
        return SingleSearch(hps, seed)
    if isinstance(s, RandomSearcher):
        return RandomSearch(
            hps, seed, max_trials=s.max_trials, max_concurrent_trials=s.max_concurrent_trials
        )
    if isinstance(s, GridSearcher):
        return GridSearch(hps, seed, max_concurrent_trials=s.max_concurrent_trials)
    time_metric, max_time = time_budget(s)
    if isinstance(s, AsyncHalvingSearcher):
        return AsyncHalvingSearch(
            hps,
            seed,
            metric=s.metric,
            smaller_is_better=s.smaller_is_better,
            time_metric=time_metric,
            max_time=max_time,
            num_rungs=s.num_rungs,
            divisor=s.divisor,
            max_trials=s.max_trials,
            max_concurrent_trials=s.max_concurrent_trials,
        )
    return AdaptiveASHASearch(
        hps,
        seed,
        metric=s.metric,
        smaller_is_better=s.smaller_is_better,
        time_metric=time_metric,
        max_time=max_time,
        max_trials=s.max_trials,
        max_concurrent_trials=s.max_concurrent_trials,
        divisor=s.divisor,
        mode=s.mode,
        max_rungs=s.max_rungs,
        explicit_bracket_rungs=s.bracket_rungs,
    )
