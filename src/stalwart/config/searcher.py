"""The ``searcher`` section: how the hyperparameter space is explored.

Determined 0.38 searchers only create and stop trials; a trial trains for its own configured
length and reports progress in ``time_metric`` units. ``max_length`` (the pre-0.38 way to give
the length) is still accepted, with a warning, so older configs keep working.

Searchers Determined has removed are rejected with a message naming the replacement
(:data:`REMOVED_SEARCHERS`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from stalwart.config.base import ConfigModel
from stalwart.config.sections import Length

__all__ = [
    "ASHA_SEARCHERS",
    "REMOVED_SEARCHERS",
    "AdaptiveASHASearcher",
    "AsyncHalvingSearcher",
    "GridSearcher",
    "RandomSearcher",
    "SearcherConfig",
    "SingleSearcher",
]

REMOVED_SEARCHERS: dict[str, str] = {
    "custom": "custom searchers were removed in Determined 0.38; use adaptive_asha, or drive "
    "trials from your own script with the Python SDK",
    "sync_halving": "sync_halving was removed; use async_halving (or adaptive_asha)",
    "adaptive": "adaptive was removed; use adaptive_asha",
    "adaptive_simple": "adaptive_simple was removed; use adaptive_asha",
    "pbt": "pbt was removed; use adaptive_asha",
}
"""Searcher names Determined no longer runs, each with what to use instead."""

ASHA_SEARCHERS = ("async_halving", "adaptive_asha")
"""Searchers that stop trials early and so need a training length (max_time or max_length)."""

_MAX_CONCURRENT = (
    "Most trials worked on at once; 0 means as many as the cluster allows. "
    "adaptive_asha rounds a value below its bracket count up."
)


class _Searcher(ConfigModel):
    """Fields every searcher has."""

    name: str = Field(description="The search method.")
    metric: str = Field(description="Name of the validation metric that ranks trials.")
    smaller_is_better: bool = Field(
        default=True, description="Whether a smaller metric is better (minimize)."
    )
    source_trial_id: int | None = Field(
        default=None,
        description="Start every trial from the latest checkpoint of this trial.",
    )
    source_checkpoint_uuid: str | None = Field(
        default=None, description="Start every trial from this checkpoint."
    )
    max_length: Length | Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="Deprecated since Determined 0.38: the training length of each trial, as "
        "`{batches|records|epochs: n}` or a unitless integer (Core API trials read it as "
        "`op.length`; ASHA searchers count it in batches). Accepted with a warning; report "
        "`time_metric` progress from the trial instead.",
    )


class SingleSearcher(_Searcher):
    """One trial with the given (constant or first-sampled) hyperparameters."""

    name: Literal["single"] = Field(description="Always `single`.")


class RandomSearcher(_Searcher):
    """``max_trials`` trials with hyperparameters sampled at random."""

    name: Literal["random"] = Field(description="Always `random`.")
    max_trials: int = Field(ge=1, description="How many trials to create.")
    max_concurrent_trials: int = Field(default=16, ge=0, description=_MAX_CONCURRENT)


class GridSearcher(_Searcher):
    """The cartesian product of the hyperparameter grid (numeric ones need ``count``)."""

    name: Literal["grid"] = Field(description="Always `grid`.")
    max_concurrent_trials: int = Field(default=16, ge=0, description=_MAX_CONCURRENT)


class _ASHA(_Searcher):
    """Fields shared by the successive-halving searchers."""

    max_trials: int = Field(ge=1, description="How many trials to create in all.")
    max_concurrent_trials: int = Field(default=16, ge=0, description=_MAX_CONCURRENT)
    divisor: float = Field(
        default=4.0,
        gt=1,
        description="Fraction of trials kept at each rung, and the growth of rung lengths.",
    )
    time_metric: str | None = Field(
        default=None,
        description="The metric trials report as their progress (e.g. `batches`); "
        "with `max_time` it replaces `max_length`.",
    )
    max_time: int | None = Field(
        default=None,
        ge=1,
        description="The most `time_metric` units any trial trains for.",
    )
    stop_once: bool = Field(
        default=False,
        description="Deprecated: accepted for old configs; stopped trials are never resumed "
        "in Stalwart either way.",
    )


class AsyncHalvingSearcher(_ASHA):
    """Asynchronous successive halving (ASHA) with one bracket."""

    name: Literal["async_halving"] = Field(description="Always `async_halving`.")
    num_rungs: int = Field(ge=1, description="Number of rungs (promotion levels).")


class AdaptiveASHASearcher(_ASHA):
    """Several ASHA brackets (Hyperband-style), the recommended searcher for large searches."""

    name: Literal["adaptive_asha"] = Field(description="Always `adaptive_asha`.")
    mode: Literal["aggressive", "standard", "conservative"] = Field(
        default="standard", description="How aggressively to stop trials early."
    )
    max_rungs: int = Field(default=5, ge=1, description="Most rungs in any bracket.")
    bracket_rungs: list[int] = Field(
        default_factory=list,
        description="Explicit rung counts per bracket (advanced; empty picks them from mode).",
    )


SearcherConfig = Annotated[
    SingleSearcher | RandomSearcher | GridSearcher | AsyncHalvingSearcher | AdaptiveASHASearcher,
    Field(discriminator="name"),
]
"""The searcher union, discriminated by ``name``."""
