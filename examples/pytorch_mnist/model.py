"""A small convolutional network for 28x28 grey digits: two convolutions, two dense layers."""

from typing import Any

from data import IMAGE_SIZE
from torch import nn

__all__ = ["build_model"]


def build_model(hparams: dict[str, Any]) -> nn.Module:
    """The network, sized by the hyperparameters ``n_filters1``, ``n_filters2``, ``dropout1``
    and ``dropout2``. It maps images (N, 1, 28, 28) to the scores of the ten digits (N, 10)."""
    n_filters1, n_filters2 = int(hparams["n_filters1"]), int(hparams["n_filters2"])
    side = IMAGE_SIZE // 4  # two 2x2 poolings
    return nn.Sequential(
        nn.Conv2d(1, n_filters1, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 28 -> 14
        nn.Conv2d(n_filters1, n_filters2, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 14 -> 7
        nn.Dropout(float(hparams["dropout1"])),
        nn.Flatten(),
        nn.Linear(n_filters2 * side * side, 128),
        nn.ReLU(),
        nn.Dropout(float(hparams["dropout2"])),
        nn.Linear(128, 10),
    )
