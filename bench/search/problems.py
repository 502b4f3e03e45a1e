"""Synthetic multi-fidelity problems: learning curves from known functions of the hyperparameters.

A problem maps a point ``x`` of the unit cube ``[0, 1]^d`` (the hyperparameters, scaled) to a
noise-free learning curve ``loss(x, t)`` over epochs ``t = 1..max_epochs``:

    loss(x, t) = final(x) + a(x) * (t ** -b(x) - max_epochs ** -b(x))

so ``loss(x, max_epochs) == final(x)``, every curve decreases, and curves cross: how fast a
configuration learns (``b``) is not how good it ends (``final``), which is what makes early
stopping fallible. Observed losses add Gaussian noise of standard deviation ``noise``. The
optimum of ``final`` over the cube is known exactly, so regret needs no estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_EPOCHS", "PROBLEMS", "RUNG_EPOCHS", "Problem"]

Vector = NDArray[np.float64]

MAX_EPOCHS = 27
"""Epochs of a fully trained configuration."""

RUNG_EPOCHS: tuple[int, ...] = (1, 3, 9, 27)
"""The epochs at which every trial reports a validation loss (ASHA's rungs with divisor 3)."""


@dataclass(frozen=True)
class Problem:
    """One synthetic problem; ``final``, ``scale`` (a) and ``rate`` (b) take ``x`` in [0, 1]^d."""

    name: str
    dims: int
    final: Callable[[Vector], float]
    scale: Callable[[Vector], float]
    rate: Callable[[Vector], float]
    optimum: float
    noise: float

    def curve(self, x: Vector, epoch: int) -> float:
        """The noise-free loss of ``x`` after ``epoch`` epochs (1 <= epoch <= MAX_EPOCHS)."""
        if not 1 <= epoch <= MAX_EPOCHS:
            raise ValueError(f"epoch must be in [1, {MAX_EPOCHS}], got {epoch}")
        b = self.rate(x)
        return self.final(x) + self.scale(x) * (math.pow(epoch, -b) - math.pow(MAX_EPOCHS, -b))

    def observe(self, x: Vector, epoch: int, rng: np.random.Generator) -> float:
        """The loss a trial reports: the curve plus Gaussian noise."""
        return self.curve(x, epoch) + self.noise * float(rng.standard_normal())

    def regret(self, x: Vector) -> float:
        """How much worse ``x`` ends than the best configuration (>= 0)."""
        return self.final(x) - self.optimum


_BRANIN_MIN = 0.397887357729738


def _branin(x: Vector) -> float:
    u, v = 15.0 * x[0] - 5.0, 15.0 * x[1]
    a, b, c = 5.1 / (4 * math.pi**2), 5.0 / math.pi, 1.0 / (8 * math.pi)
    return float((v - a * u * u + b * u - 6.0) ** 2 + 10.0 * (1 - c) * math.cos(u) + 10.0)


def _mlp_final(x: Vector) -> float:
    log_lr = -5.0 + 4.0 * x[0]  # log10 of the learning rate, optimum at -2.8
    width, dropout = x[1], 0.5 * x[2]  # optimum at 0.7 and 0.15
    lr_term = 0.5 * ((log_lr + 2.8) / 2.0) ** 2
    return float(0.08 + lr_term + 0.1 * (width - 0.7) ** 2 + 0.2 * (dropout - 0.15) ** 2)


PROBLEMS: dict[str, Problem] = {
    # Branin (scaled to about [0, 1]) as the final loss; how fast a configuration learns
    # depends on x[0], unrelated to where the optimum is.
    "branin": Problem(
        name="branin",
        dims=2,
        final=lambda x: (_branin(x) - _BRANIN_MIN) / 300.0,
        scale=lambda x: 0.2 + 0.4 * float(x[1]),
        rate=lambda x: 0.5 + float(x[0]),
        optimum=0.0,
        noise=0.01,
    ),
    # A small network's loss over (learning rate, width, dropout): a higher learning rate
    # learns faster, and the best one is not the fastest.
    "mlp": Problem(
        name="mlp",
        dims=3,
        final=_mlp_final,
        scale=lambda x: 0.5 * (1.0 + 0.5 * float(x[1])),
        rate=lambda x: 0.3 + 0.3 * 4.0 * float(x[0]),
        optimum=0.08,
        noise=0.01,
    ),
}
