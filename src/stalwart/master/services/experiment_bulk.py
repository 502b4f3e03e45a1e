"""Actions on many experiments of a project at once (Determined's bulk experiment actions: the
web UI's and ``bindings.post_ActivateExperiments`` & co.).

A request names its experiments by id, or by :class:`BulkFilters` (then the ids are ignored,
as in Determined). Each experiment gets one :class:`ActionResult`: an empty ``error`` means
done. Named experiments that do not exist, are in another project, are archived (for state
actions) or that the caller may not change are answered ``experiment 'N' not found``, as
Determined does; filters only ever select experiments the caller may change.

Every state change goes through the same door as the single-experiment routes
(:mod:`stalwart.master.services.experiments`), one experiment at a time, each in its own
transaction: one refusal never undoes the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, StalwartError
from stalwart.master import policy
from stalwart.master.db.tables import Experiment, User
from stalwart.master.transitions import EXPERIMENT_TERMINAL

__all__ = [
    "GLOBAL_PROJECT",
    "ActionResult",
    "BulkFilters",
    "Selection",
    "apply_each",
    "not_found",
    "select_experiments",
]

GLOBAL_PROJECT = -1
"""The project id that means "every project" (Determined's ``GlobalProjectID``)."""

NON_TERMINAL = ("ACTIVE", "PAUSED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR")


@dataclass(frozen=True)
class ActionResult:
    """One experiment's outcome: ``error`` is empty when the action was done."""

    id: int
    error: str = ""


@dataclass(frozen=True)
class BulkFilters:
    """``v1BulkExperimentFilters``: every given field must hold (name and description match
    case-insensitive substrings; every label must be present)."""

    archived: bool | None = None
    description: str | None = None
    excluded_ids: Sequence[int] = ()
    labels: Sequence[str] = ()
    name: str | None = None
    project_id: int | None = None
    states: Sequence[str] = ()
    user_ids: Sequence[int] = ()


@dataclass
class Selection:
    """The experiments an action applies to, and the results of those it cannot."""

    experiments: list[Experiment] = field(default_factory=list)
    results: list[ActionResult] = field(default_factory=list)


def not_found(experiment_id: int) -> ActionResult:
    """Determined's answer for an experiment the caller cannot act on."""
    return ActionResult(experiment_id, f"experiment '{experiment_id}' not found")


def _may_change(session: Session, user: User, experiment: Experiment) -> bool:
    try:
        policy.require_change_experiment(session, user, experiment)
    except ForbiddenError:
        return False
    return True


def _matches(experiment: Experiment, filters: BulkFilters) -> bool:
    if experiment.id in filters.excluded_ids:
        return False
    if filters.archived is not None and experiment.archived != filters.archived:
        return False
    if filters.name and filters.name.lower() not in experiment.name.lower():
        return False
    description = (experiment.description or "").lower()
    if filters.description and filters.description.lower() not in description:
        return False
    if filters.labels and not set(filters.labels) <= set(experiment.labels or ()):
        return False
    if filters.states and experiment.state not in filters.states:
        return False
    if filters.user_ids and experiment.owner_id not in filters.user_ids:
        return False
    return filters.project_id in (None, 0) or experiment.project_id == filters.project_id


def select_experiments(
    session: Session,
    user: User,
    project_id: int,
    ids: Sequence[int],
    filters: BulkFilters | None,
    *,
    default_states: Sequence[str] = (),
    live_only: bool = True,
) -> Selection:
    """The experiments of ``project_id`` (:data:`GLOBAL_PROJECT`: any) that ``ids`` (or, when
    given, ``filters``) name and ``user`` may change; ``live_only`` leaves archived ones out.

    ``default_states`` (``STATE_``-less) apply when the filters name no states. Named ids
    that are left out get a :func:`not_found` result, in the order they were named.
    """
    query = select(Experiment)
    if project_id != GLOBAL_PROJECT:
        query = query.where(Experiment.project_id == project_id)
    if live_only:
        query = query.where(Experiment.archived.is_(False))
    if filters is None:
        query = query.where(Experiment.id.in_(list(ids)))
    else:
        states = tuple(s.removeprefix("STATE_") for s in filters.states) or tuple(default_states)
        filters = BulkFilters(**{**filters.__dict__, "states": states})
    out = Selection()
    for experiment in session.scalars(query.order_by(Experiment.id)):
        if filters is not None and not _matches(experiment, filters):
            continue
        if _may_change(session, user, experiment):
            out.experiments.append(experiment)
    if filters is None:
        chosen = {e.id for e in out.experiments}
        out.results.extend(not_found(i) for i in dict.fromkeys(ids) if i not in chosen)
    return out


def apply_each(
    session: Session,
    experiments: Sequence[Experiment],
    action: Callable[[Experiment], None],
    *,
    terminal_error: str | None = None,
    run_terminal: bool = False,
) -> list[ActionResult]:
    """Run ``action`` on each experiment (it commits; a refusal is rolled back and becomes
    that experiment's error). Unless ``run_terminal``, terminal experiments are answered
    ``terminal_error`` without running it, or done when that is None (cancel and kill:
    already over)."""
    results = []
    for experiment in experiments:
        experiment_id = experiment.id
        if not run_terminal and experiment.state in EXPERIMENT_TERMINAL:
            results.append(ActionResult(experiment_id, terminal_error or ""))
            continue
        try:
            action(experiment)
        except StalwartError as exc:
            session.rollback()
            results.append(ActionResult(experiment_id, str(exc)))
            continue
        results.append(ActionResult(experiment_id))
    return results
