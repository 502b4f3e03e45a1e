"""Hyperparameter searchers: pure logic that decides which trials to create and stop.

Determined 0.38's "searcher-less" model: a searcher only creates trials
(:class:`~stalwart.master.searcher.actions.Create`), stops them early
(:class:`~stalwart.master.searcher.actions.Stop`) and ends the search
(:class:`~stalwart.master.searcher.actions.Shutdown`), driven by validation metrics and trial
exits. See :mod:`stalwart.master.searcher.base` for the contracts and
``docs/contributing/searcher.md`` for adding a searcher.
"""

from __future__ import annotations

from stalwart.master.searcher.actions import Action, Create, Shutdown, Stop, action_to_dict
from stalwart.master.searcher.adaptive_asha import AdaptiveASHASearch
from stalwart.master.searcher.asha import AsyncHalvingSearch
from stalwart.master.searcher.base import (
    ExitedReason,
    SearcherMetricError,
    SearcherStateError,
    SearchMethod,
)
from stalwart.master.searcher.factory import make_searcher
from stalwart.master.searcher.grid import GridSearch
from stalwart.master.searcher.random_search import RandomSearch
from stalwart.master.searcher.single import SingleSearch

__all__ = [
    "Action",
    "AdaptiveASHASearch",
    "AsyncHalvingSearch",
    "Create",
    "ExitedReason",
    "GridSearch",
    "RandomSearch",
    "SearchMethod",
    "SearcherMetricError",
    "SearcherStateError",
    "Shutdown",
    "SingleSearch",
    "Stop",
    "action_to_dict",
    "make_searcher",
]
