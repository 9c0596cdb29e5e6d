"""What every section of the scenario is built from: frozen models, durations in seconds, headers."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from surgelab.httpfields import VALUE_RULE, header_name_problem, header_value_problem
from surgelab.units import parse_duration

__all__ = ["ScenarioModel", "Seconds", "PositiveSeconds", "Headers", "HeaderName", "NO_ECHO"]

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]

NO_ECHO = "header"
"""The error type of a value that is never quoted back in an error (a header may hold a credential)."""


def _header_name(name: str) -> str:
    problem = header_name_problem(name)
    if problem:
        raise PydanticCustomError(NO_ECHO, problem)
    return name


def _header_value(value: str) -> str:
    problem = header_value_problem(value)
    if problem:
        raise PydanticCustomError(NO_ECHO, f"the value {problem}: {VALUE_RULE}")
    return value


HeaderName = Annotated[str, AfterValidator(_header_name)]
Headers = dict[HeaderName, Annotated[str, AfterValidator(_header_value)]]
"""HTTP headers as written in a scenario: checked here, so a bad one is named with its line, not sent."""


class ScenarioModel(BaseModel):
    """Frozen, and strict about unknown fields: a typo is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, validate_default=True)
