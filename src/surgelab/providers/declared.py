"""What a provider declares, kept apart from what surgelab measured, each fact with its source and date.

Part of seed 004's checklist cannot be measured from outside: the regions served, a path to
dedicated resources, a burst plan, support and compliance terms. A declared-facts file records
them the way a careful selection does, with where each fact came from and when::

    kind: surgelab-declared
    target: api
    facts:
      regions: {value: [cn-east, cn-north, cn-south], source: "https://example.com/regions", as_of: 2026-11-20}
      dedicated_path: {value: pass, source: "sales call with the account manager", as_of: 2026-11-12}

``score`` judges declared facts like measured ones and says, for every verdict, which it was.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from surgelab.providers.measured import Measured
from surgelab.providers.requirements import METRICS
from surgelab.scenario.loader import describe_error, line_of
from surgelab.yamlfile import read_yaml

__all__ = ["DeclaredFact", "DeclaredFacts", "DeclaredError", "load_declared", "declared_measurements"]


class DeclaredError(Exception):
    """An unusable declared-facts file; ``messages`` holds one ``file:line: what`` line per problem."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        super().__init__("\n".join(messages))


class DeclaredFact(BaseModel):
    """One fact: its value (a number, pass/fail, or a list of names), who said it, and when."""

    model_config = ConfigDict(extra="forbid")

    value: float | list[str] | Literal["pass", "fail"]
    source: str = Field(min_length=1, description="Where the fact came from: a URL, a contract clause, a call.")
    as_of: dt.date = Field(description="When it was stated or last checked (YYYY-MM-DD).")


class DeclaredFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["surgelab-declared"]
    target: str = Field(min_length=1)
    facts: dict[str, DeclaredFact]

    @field_validator("facts")
    @classmethod
    def _known(cls, facts: dict[str, DeclaredFact]) -> dict[str, DeclaredFact]:
        unknown = [name for name in facts if name not in METRICS]
        if unknown:
            raise ValueError(f"unknown fact(s) {', '.join(unknown)}; known: {', '.join(METRICS)}")
        return facts


def load_declared(path: Path) -> DeclaredFacts:
    data, root = read_yaml(path, "declared facts", DeclaredError)
    try:
        return DeclaredFacts.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and "[" in p))
            where = ".".join(str(p) for p in loc) or "file"
            lines.append(f"{path}:{line_of(root, loc) or 1}: {where}: {describe_error(error)}")
        raise DeclaredError(lines) from None


def declared_measurements(facts: DeclaredFacts, path: Path) -> dict[str, Measured]:
    """Each fact as evidence: a count and the names for a list, 1/0 for pass/fail."""
    out = {}
    for name, fact in facts.facts.items():
        value: Any = fact.value
        items = None
        if isinstance(value, list):
            items, value = tuple(v.lower() for v in value), float(len(value))
        elif value in ("pass", "fail"):
            value = 1.0 if value == "pass" else 0.0
        how = f"declared by the provider: {fact.source}, as of {fact.as_of.isoformat()}"
        out[name] = Measured(float(value), str(path), how, items, declared=True)
    return out
