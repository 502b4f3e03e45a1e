"""The base class every config model derives from.

Conventions (read before adding a model):

- ``extra="forbid"``: an unknown key is an error, reported with a "did you mean" hint.
- ``strict=True``: like Determined's JSON Schema, ``"5"`` is not an integer and ``1`` is not a
  boolean (an integer is still accepted where a number is expected).
- Every field has ``Field(description=...)``; the JSON Schema and the config reference are
  generated from these descriptions.
- Every field has a default that is Determined's default, so validating a (merged) user config
  yields the fully defaulted config. A required field has no default.
- An explicit ``null`` in YAML means "not set" (Determined's rule): the before-validator drops
  ``None`` values of declared fields so the default applies. Free-form values (``data``,
  ``pod_spec``, a const hyperparameter's ``val``) are typed ``Any`` and keep their nulls.
- Models are frozen: a validated config is a value; derive a new one with ``model_copy``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["ConfigModel"]


class ConfigModel(BaseModel):
    """Base of all experiment-config and master-config models."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        populate_by_name=True,
        validate_default=False,
        use_attribute_docstrings=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_means_unset(cls, data: Any) -> Any:
        """Drop explicit nulls of declared fields so that their defaults apply."""
        if isinstance(data, dict):
            fields = cls.model_fields
            aliases = {f.alias for f in fields.values() if f.alias}
            return {
                k: v for k, v in data.items() if not (v is None and (k in fields or k in aliases))
            }
        return data

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form of this model, every field present (the defaulted config)."""
        return self.model_dump(mode="json", by_alias=True)
