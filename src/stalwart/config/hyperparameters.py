"""Hyperparameters: const, int, double, log, categorical, and nested groups.

Accepted forms (as Determined accepts them):

- a bare value (``lr: 0.1``, ``layers: [64, 32]``, ``name: null``) is a constant;
- a mapping with ``type`` in :data:`HYPERPARAMETER_TYPES` is a typed hyperparameter;
- a mapping without ``type`` is a nested group of hyperparameters, to any depth.

In the defaulted config constants are written in full (``{type: const, val: 0.1}``) and nested
groups stay plain mappings. ``count`` is only meaningful for the grid searcher, which requires it
on every numeric hyperparameter (checked in :mod:`stalwart.config.checks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    model_validator,
)
from typing_extensions import TypeAliasType

from stalwart.config.base import ConfigModel

__all__ = [
    "HYPERPARAMETER_TYPES",
    "CategoricalHyperparameter",
    "ConstHyperparameter",
    "DoubleHyperparameter",
    "Hyperparameter",
    "Hyperparameters",
    "IntHyperparameter",
    "LogHyperparameter",
    "NumericHyperparameter",
]

HYPERPARAMETER_TYPES = ("const", "int", "double", "log", "categorical")


class ConstHyperparameter(ConfigModel):
    """A hyperparameter with one fixed value."""

    type: Literal["const"] = Field(description="Always `const`.")
    val: Any = Field(default=None, description="The value, of any YAML type.")


_COUNT_DESCRIPTION = "Grid points for the grid searcher (required there; ignored elsewhere)."


class _Range(ConfigModel):
    """Shared checks of the numeric ranges (Determined requires minval < maxval)."""

    @model_validator(mode="after")
    def _ordered(self) -> _Range:
        lo, hi = getattr(self, "minval"), getattr(self, "maxval")  # noqa: B009
        if lo >= hi:
            raise ValueError(f"minval ({lo}) must be less than maxval ({hi})")
        return self


class IntHyperparameter(_Range):
    """An integer drawn uniformly from [minval, maxval]."""

    type: Literal["int"] = Field(description="Always `int`.")
    minval: int = Field(description="Smallest value (inclusive).")
    maxval: int = Field(description="Largest value (inclusive).")
    count: int | None = Field(default=None, ge=1, description=_COUNT_DESCRIPTION)


class DoubleHyperparameter(_Range):
    """A float drawn uniformly from [minval, maxval]."""

    type: Literal["double"] = Field(description="Always `double`.")
    minval: float = Field(description="Smallest value (inclusive).")
    maxval: float = Field(description="Largest value (inclusive).")
    count: int | None = Field(default=None, ge=1, description=_COUNT_DESCRIPTION)


class LogHyperparameter(_Range):
    """``base ** x`` with x drawn uniformly from [minval, maxval]."""

    type: Literal["log"] = Field(description="Always `log`.")
    minval: float = Field(description="Smallest exponent (inclusive).")
    maxval: float = Field(description="Largest exponent (inclusive).")
    base: float = Field(default=10.0, gt=0, description="Base of the logarithm.")
    count: int | None = Field(default=None, ge=1, description=_COUNT_DESCRIPTION)


class CategoricalHyperparameter(ConfigModel):
    """One of a list of values."""

    type: Literal["categorical"] = Field(description="Always `categorical`.")
    vals: list[Any] = Field(min_length=1, description="The values to choose from.")


NumericHyperparameter = IntHyperparameter | DoubleHyperparameter | LogHyperparameter


def _kind(value: Any) -> str:
    """Which form a raw hyperparameter value has (the union's discriminator)."""
    if isinstance(value, dict):
        if "type" in value and isinstance(value["type"], str):
            return str(value["type"])
        return "nested"
    if isinstance(value, ConfigModel):
        return str(getattr(value, "type", "const"))
    return "shorthand"


def _as_const(value: Any) -> dict[str, Any]:
    return {"type": "const", "val": value}


if TYPE_CHECKING:
    # mypy reads the plain recursive alias; pydantic needs the TypeAliasType below.
    Hyperparameter = (
        ConstHyperparameter
        | IntHyperparameter
        | DoubleHyperparameter
        | LogHyperparameter
        | CategoricalHyperparameter
        | dict[str, "Hyperparameter"]
    )
else:
    Hyperparameter = TypeAliasType(
        "Hyperparameter",
        Annotated[
            Annotated[ConstHyperparameter, Tag("const")]
            | Annotated[IntHyperparameter, Tag("int")]
            | Annotated[DoubleHyperparameter, Tag("double")]
            | Annotated[LogHyperparameter, Tag("log")]
            | Annotated[CategoricalHyperparameter, Tag("categorical")]
            | Annotated[ConstHyperparameter, BeforeValidator(_as_const), Tag("shorthand")]
            | Annotated[dict[str, "Hyperparameter"], Tag("nested")],
            Discriminator(
                _kind,
                custom_error_type="unknown_hyperparameter_type",
                custom_error_message="unknown hyperparameter type",
            ),
        ],
    )
"""One hyperparameter: a typed one, a constant, or a nested group."""

Hyperparameters = dict[str, Hyperparameter]
"""The ``hyperparameters`` section: names to hyperparameters."""
