"""The base class of every config section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationInfo
from pydantic.alias_generators import to_camel

WRITTEN = "written"
"""Validation context key: true when the data was written by a person (a config file), not
built by code. Durations then need a unit, and Kueue's v1beta2 shapes apply."""


def written(info: ValidationInfo) -> bool:
    """Whether the data being validated came from a config file (see ``WRITTEN``)."""
    return bool(info.context and info.context.get(WRITTEN))


class Section(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
