"""Sampling distributions for token lengths and think times, as scenario data.

A bare number means a fixed value; otherwise ``{dist: uniform, min: .., max: ..}`` and so on.
Durations (think time) accept unit strings such as ``2s``; lengths are rounded to integers
by the caller.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from surgelab.files import scenario_path
from surgelab.tokenizer import MAX_TOKENS
from surgelab.traces import Trace, read_trace_cached
from surgelab.units import parse_duration

__all__ = [
    "Distribution", "TokenCount", "MAX_TOKENS", "Fixed", "Uniform", "Normal", "LogNormal", "Exponential", "Empirical",
    "as_distribution",
]  # fmt: skip


def _number(value: Any) -> Any:
    """Accept durations with units wherever a number is expected (``2s`` → 2.0)."""
    if isinstance(value, str):
        return parse_duration(value)
    return value


Number = Annotated[float, BeforeValidator(_number)]


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    @property
    def mean(self) -> float:  # pragma: no cover
        raise NotImplementedError


class Fixed(_Dist):
    dist: Literal["fixed"] = "fixed"
    value: Number = Field(ge=0)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.value, dtype=float)

    @property
    def mean(self) -> float:
        return self.value


class Uniform(_Dist):
    dist: Literal["uniform"]
    min: Number = Field(ge=0)
    max: Number = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.max < self.min:
            raise ValueError("max must be >= min")
        return self

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.uniform(self.min, self.max, size=size)

    @property
    def mean(self) -> float:
        return (self.min + self.max) / 2


class Normal(_Dist):
    """Normal, clipped to [min, max] (min defaults to 0: no negative lengths or times)."""

    dist: Literal["normal"]
    mean_: Number = Field(alias="mean", ge=0)
    std: Number = Field(ge=0)
    min: Number = 0.0
    max: Number = float("inf")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.clip(rng.normal(self.mean_, self.std, size=size), self.min, self.max)

    @property
    def mean(self) -> float:
        return self.mean_


class LogNormal(_Dist):
    """Log-normal given by its own mean and standard deviation (not those of the log)."""

    dist: Literal["lognormal"]
    mean_: Number = Field(alias="mean", gt=0)
    std: Number = Field(ge=0)
    max: Number = float("inf")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        sigma2 = np.log1p((self.std / self.mean_) ** 2)
        mu = np.log(self.mean_) - sigma2 / 2
        return np.minimum(rng.lognormal(mu, np.sqrt(sigma2), size=size), self.max)

    @property
    def mean(self) -> float:
        return self.mean_


class Exponential(_Dist):
    dist: Literal["exponential"]
    mean_: Number = Field(alias="mean", ge=0)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.mean_, size=size) if self.mean_ > 0 else np.zeros(size)

    @property
    def mean(self) -> float:
        return self.mean_


class Empirical(_Dist):
    """Values drawn uniformly from a list, or from a column of a trace or dataset file."""

    dist: Literal["empirical"]
    values: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(None, min_length=1)
    file: str | None = Field(None, description="A trace or dataset (docs/traces.md); relative to the scenario file.")
    column: Literal["prompt_tokens", "output_tokens"] = "prompt_tokens"
    format: str = "auto"

    @field_validator("file")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else scenario_path(value, info, "distribution file")

    @model_validator(mode="after")
    def _one_source(self) -> Empirical:
        if (self.values is None) == (self.file is None):
            raise ValueError("give exactly one of values or file")
        return self

    def read(self) -> Trace:
        """The file's rows (cached: the same file is read once per process)."""
        assert self.file is not None, "an empirical distribution of values reads no file"
        return read_trace_cached(self.file, self.format)

    def _data(self) -> np.ndarray:
        if self.values is not None:
            return np.asarray(self.values, dtype=float)
        data = np.asarray(getattr(self.read(), self.column), dtype=float)
        return data[data >= 1]  # -1 marks rows without that length

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(self._data(), size=size)

    @property
    def mean(self) -> float:
        return float(self._data().mean())


def as_distribution(value: Any) -> Any:
    """A bare number (or duration string) is shorthand for a fixed distribution."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return {"dist": "fixed", "value": value}
    return value


Distribution = Annotated[
    Fixed | Uniform | Normal | LogNormal | Exponential | Empirical,
    Field(discriminator="dist"),
    BeforeValidator(as_distribution),
]
"""Any of the distributions above, or a bare number for a fixed value."""

_NUMBERS = ("value", "min", "max", "mean", "std")


def _token_number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number of tokens, e.g. 256, or a distribution such as {{dist: uniform, min: 100, max: 500}} (got {value!r})")
    if isinstance(value, str):
        try:
            return float(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"expected a number of tokens, e.g. 256 (got {value!r})") from None
    return value


def _token_input(value: Any) -> Any:
    """Token counts are plain numbers (``256``, ``1e3``): a duration or a word is an error that says so."""
    if isinstance(value, _Dist):
        return value
    if isinstance(value, dict):
        return {k: (_token_number(v) if k in _NUMBERS and v is not None else v) for k, v in value.items()}
    return _token_number(value)


_TOP: dict[type[_Dist], str] = {Fixed: "value", Uniform: "max", Normal: "mean_", LogNormal: "mean_", Exponential: "mean_"}
"""The field that bounds a distribution's token counts from above (its mean where it has no maximum)."""


def _within_tokens(dist: Any) -> Any:
    top = _TOP.get(type(dist))
    value = getattr(dist, top) if top else None
    if value is not None and value > MAX_TOKENS:
        raise ValueError(f"{value:,.0f} tokens is more than any model takes (at most {MAX_TOKENS:,})")
    return dist


TokenCount = Annotated[Distribution, BeforeValidator(_token_input), AfterValidator(_within_tokens)]
"""A distribution of token counts: numbers only (no units), at most ``MAX_TOKENS``."""
