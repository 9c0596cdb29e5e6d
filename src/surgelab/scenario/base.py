"""What every section of the scenario is built from: frozen models, and durations in seconds."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from surgelab.units import parse_duration

__all__ = ["ScenarioModel", "Seconds", "PositiveSeconds"]

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class ScenarioModel(BaseModel):
    """Frozen, and strict about unknown fields: a typo is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, validate_default=True)
