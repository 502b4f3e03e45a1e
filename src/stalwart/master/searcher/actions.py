"""What a searcher asks the master to do: create a trial, stop a trial, end the experiment.

These mirror Determined 0.38's searcher actions (``Create``, ``Stop``, ``Shutdown``). Actions are
values: frozen, comparable, and JSON-ready through :func:`action_to_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Action", "Create", "Shutdown", "Stop", "action_to_dict"]


@dataclass(frozen=True)
class Create:
    """Start a new trial.

    ``hparams`` holds the sampled values (nested groups as nested dicts), exactly what the trial
    receives as ``DET_HPARAMS``; ``trial_seed`` is in ``[0, 2**31)``. ``request_id`` names the trial
    in every later call to the searcher; it is unique within one search. (Not hashable: the
    hyperparameters are a dict.)
    """

    request_id: str
    hparams: dict[str, Any]
    trial_seed: int


@dataclass(frozen=True)
class Stop:
    """Stop a running trial early (Determined: ``EarlyStoppedBySearcher``, a preemption signal).

    The trial checkpoints and exits; its state becomes COMPLETED. The master still reports the
    exit to the searcher with ``on_trial_exited``.
    """

    request_id: str


@dataclass(frozen=True)
class Shutdown:
    """The search is over: every trial it created has exited.

    ``cancel``: every trial was canceled by a user. ``failure``: every trial errored. Neither set:
    the experiment completed.
    """

    cancel: bool = False
    failure: bool = False


Action = Create | Stop | Shutdown
"""One searcher action."""


def action_to_dict(action: Action) -> dict[str, Any]:
    """The JSON form of an action, with its kind under ``"type"`` (for logs and events)."""
    if isinstance(action, Create):
        return {
            "type": "create",
            "request_id": action.request_id,
            "hparams": action.hparams,
            "trial_seed": action.trial_seed,
        }
    if isinstance(action, Stop):
        return {"type": "stop", "request_id": action.request_id}
    return {"type": "shutdown", "cancel": action.cancel, "failure": action.failure}
