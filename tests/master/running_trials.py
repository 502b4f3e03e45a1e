"""Trials ready to report metrics, made through the master's own services (no HTTP)."""

from __future__ import annotations

from sqlalchemy import select

from stalwart.master.db.tables import User
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.tasks import create_trial, start_allocation
from stalwart.master.state import MasterState

__all__ = ["CONFIG", "running_trials"]

CONFIG = "entrypoint: python3 t.py\nsearcher: {name: single, metric: loss}\n"


def running_trials(
    state: MasterState, count: int, *, activate: bool = False
) -> tuple[int, list[int]]:
    """A new experiment of the admin's with ``count`` trials, each with an allocation started
    (run 1, so reports of run 1 are accepted): ``(experiment id, trial ids)``. A paused
    experiment (the default) is left alone by the cluster loop's searcher."""
    with state.sessions() as session:
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        exp = create_experiment(
            session,
            state.settings,
            admin,
            config_text=CONFIG,
            model_definition=[],
            activate=activate,
        ).experiment
        made = [create_trial(session, exp, hparams={}, seed=i) for i in range(count)]
        for trial in made:
            start_allocation(session, trial.task_id, slots=1)
        session.commit()
        return exp.id, [t.id for t in made]
