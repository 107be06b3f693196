"""The base of the REST API's response models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """A response model serialised with camelCase keys, as Kubernetes tooling expects."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
