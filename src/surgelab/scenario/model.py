"""The scenario schema: what to hit, how hard, with what, and what counts as passing.

Config is pure data: no clocks, RNGs or connections live here (they belong to the runner).
Every duration accepts unit strings (``30s``, ``250ms``) and is stored in seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from surgelab.load.arrivals import Arrival
from surgelab.scenario.thresholds import Threshold
from surgelab.units import parse_duration
from surgelab.workload.distributions import Distribution

__all__ = ["Scenario", "Target", "Timeouts", "Load", "Workload", "Slo", "Validity", "Output"]

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, validate_default=True)


class Timeouts(_Model):
    """Each expiry ends the request in state ``timeout`` with the stage named in its error."""

    connect: PositiveSeconds = Field(10.0, description="TCP (and TLS) connection set-up.")
    first_token: PositiveSeconds = Field(60.0, description="From send to the first content token.")
    total: PositiveSeconds = Field(300.0, description="From send to the end of the response.")


class Target(_Model):
    """The endpoint under test. The API key is read from the environment, never stored."""

    url: AnyHttpUrl = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(description="Model name sent in every request.")
    endpoint: Literal["chat", "completions"] = Field("chat", description="/chat/completions or /completions.")
    stream: bool = Field(True, description="Stream with SSE (needed for TTFT and ITL).")
    api_key_env: str | None = Field(None, description="NAME of the environment variable holding the API key.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers.")
    force_output_tokens: bool = Field(
        True,
        description="Send ignore_eos and min_tokens so outputs have exactly the requested length (vLLM, SGLang, llama.cpp, surgelab serve). Turn off for APIs that reject unknown fields.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra JSON fields merged into every request body."
    )
    connection: Literal["keepalive", "close"] = Field(
        "keepalive", description="keepalive reuses pooled connections; close opens a new connection per request."
    )
    timeouts: Timeouts = Timeouts()

    @property
    def base_url(self) -> str:
        return str(self.url).rstrip("/")


class Load(_Model):
    """Open loop (``rate``) or closed loop (``concurrency``); exactly one of the two."""

    rate: float | None = Field(None, gt=0, allow_inf_nan=False, description="Open loop: requests per second.")
    arrival: Arrival = Field(Arrival.POISSON, description="Open loop: constant, poisson or gamma arrivals.")
    cv: float = Field(1.0, gt=0, allow_inf_nan=False, description="Gamma arrivals: coefficient of variation of the gaps.")
    concurrency: int | None = Field(None, ge=1, description="Closed loop: number of virtual users.")
    think_time: Distribution = Field(
        0.0, description="Closed loop: pause between a response and the user's next request."
    )
    ramp_up: Seconds = Field(0.0, description="Closed loop: users start evenly spread over this time.")
    duration: PositiveSeconds = Field(60.0, description="How long to send for.")
    warmup: Seconds = Field(0.0, description="Initial period recorded but excluded from the summary.")
    max_in_flight: int = Field(
        1000, ge=1, description="Open loop: a request that would exceed this is dropped and counted."
    )
    grace: Seconds = Field(
        10.0, description="On stop, how long in-flight requests may finish before they are cancelled."
    )

    @model_validator(mode="after")
    def _one_mode(self) -> Load:
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError("give exactly one of rate (open loop) or concurrency (closed loop)")
        if self.warmup >= self.duration:
            raise ValueError(f"warmup ({self.warmup:g}s) must be shorter than duration ({self.duration:g}s)")
        return self

    @property
    def mode(self) -> Literal["open", "closed"]:
        return "open" if self.rate is not None else "closed"


class Workload(_Model):
    """What each request asks for."""

    prompt_tokens: Distribution = Field(256, description="Prompt length in tokens (built-in tokenizer).")
    output_tokens: Distribution = Field(128, description="max_tokens of each request.")
    unique_prefix: bool = Field(
        True, description="Start every prompt with a unique token sequence so prefix caches cannot flatter the result."
    )
    system_prompt_tokens: int = Field(
        0, ge=0, description="A shared system prompt of this many tokens, identical in every request."
    )


class Slo(_Model):
    """Per-request service-level objectives; goodput counts requests meeting all that are set."""

    ttft: Seconds | None = Field(None, description="Time to first token, from the intended send.")
    itl: Seconds | None = Field(None, description="Bound on a request's mean inter-token latency.")
    tpot: Seconds | None = Field(None, description="Time per output token after the first.")
    e2e: Seconds | None = Field(None, description="Whole response, from the intended send.")


class Validity(_Model):
    """When the client itself is the limit, the run says so rather than report a wrong load."""

    max_lag_p99: Seconds = Field(0.05, description="Schedule lag P99 above this marks the run invalid.")
    allow_drops: bool = Field(False, description="Dropped requests mark the run invalid unless allowed.")


class Output(_Model):
    """Where the run directory goes; records are flushed so a crash loses at most one interval."""

    dir: str | None = Field(None, description="Run directory; default runs/<name>-<timestamp>.")
    flush_interval: PositiveSeconds = Field(1.0, description="How often records are written to disk.")


class Scenario(_Model):
    """A complete, reproducible test: the resolved form is saved in every run directory."""

    name: str = Field("run", description="Names the run (and its default directory).")
    description: str = Field("", description="Free text for people reading the scenario.")
    seed: int = Field(0, ge=0, description="Fixes the arrival schedule and the workload: same seed, same requests.")
    target: Target = Field(description="The endpoint under test.")
    load: Load = Field(description="How hard: open-loop rate or closed-loop users, duration, warm-up.")
    workload: Workload = Field(Workload(), description="What each request asks for.")
    slo: Slo = Field(Slo(), description="Per-request objectives that define goodput.")
    thresholds: list[Threshold] = Field(default_factory=list, description="Pass/fail criteria (see below).")
    validity: Validity = Field(Validity(), description="When the run's own numbers cannot be trusted.")
    output: Output = Field(Output(), description="Where and how often results are written.")
