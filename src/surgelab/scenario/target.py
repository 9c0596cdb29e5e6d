"""The scenario's targets: where requests go, their time-outs and retries, and how several share a run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AnyHttpUrl, BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from surgelab.files import scenario_path
from surgelab.kinds import KINDS
from surgelab.scenario.base import HeaderName, Headers, PositiveSeconds, ScenarioModel, Seconds
from surgelab.units import parse_ratio

__all__ = [
    "Timeouts", "Backoff", "Retry", "RetryOn", "Tls", "Target", "Price", "NamedTarget", "Health", "Routing", "inherited",
    "Endpoint",
]  # fmt: skip

if TYPE_CHECKING:
    Endpoint = str  # the registry is filled at run time: a type checker sees a name
else:
    Endpoint = Literal[KINDS.having("endpoint")]  # the kinds a target (or a class) may name as its endpoint


class Timeouts(ScenarioModel):
    """Each expiry ends the request in state ``timeout`` with the stage named in its error."""

    connect: PositiveSeconds = Field(10.0, description="TCP (and TLS) connection set-up.")
    first_token: PositiveSeconds = Field(60.0, description="From send to the first content token.")
    total: PositiveSeconds = Field(300.0, description="From send to the end of the response.")


class Backoff(ScenarioModel):
    """Wait before a retry: ``base × 2^(attempt−1)``, at most ``max``, and never less than a Retry-After."""

    base: Seconds = Field(0.1, description="Wait before the first retry.")
    max: Seconds = Field(5.0, description="Longest wait between attempts.")
    honour_retry_after: bool = Field(True, description="Wait at least the server's Retry-After (seconds or an HTTP date).")


RetryOn = Annotated[int, Field(ge=400, le=599)] | Literal["connection_error", "timeout"]
_RETRIED: list[RetryOn] = [429, 503, "connection_error"]


class Retry(ScenarioModel):
    """An optional retry policy, off unless given. Every request still ends in one state (its last
    attempt's); the records count its attempts. Bodies sent as multipart (transcription) are not retried."""

    on: list[RetryOn] = Field(
        default_factory=lambda: _RETRIED.copy(),
        description="What is retried: HTTP statuses, connection_error, timeout.",
    )
    max_attempts: int = Field(3, ge=1, le=10, description="Sends per request, the first one included.")
    budget: Annotated[float, BeforeValidator(lambda v: parse_ratio(v) if isinstance(v, str) else v), Field(ge=0, le=1)] = Field(
        0.1, description="Retries may add at most this share of the requests sent so far (at least one retry is always allowed), so retries cannot multiply an overload."
    )
    backoff: Backoff = Backoff()

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        """YAML 1.1 reads an unquoted ``on:`` key as the boolean true."""
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data


class Tls(ScenarioModel):
    """How HTTPS targets are trusted and how surgelab shows itself to them (docs/networks.md)."""

    ca_cert: str | None = Field(
        None, description="PEM file of the CA(s) that signed the server's certificate (a private CA), trusted besides the system's."
    )
    client_cert: str | None = Field(None, description="PEM client certificate for mutual TLS (may hold the key too).")
    client_key: str | None = Field(None, description="PEM key of client_cert, when it is in a file of its own.")
    server_name: str | None = Field(
        None, description="Name sent as SNI and checked against the certificate, instead of the URL's host (e.g. when the URL is an IP)."
    )
    insecure: bool = Field(
        False, description="Do not verify the server's certificate at all: test benches only; the terminal and the report say so."
    )

    @field_validator("ca_cert", "client_cert", "client_key")
    @classmethod
    def _exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else str(Path(scenario_path(value, info, f"tls.{info.field_name}")).resolve())

    @model_validator(mode="after")
    def _key_needs_cert(self) -> Tls:
        if self.client_key and not self.client_cert:
            raise ValueError("client_key needs client_cert (the certificate it belongs to)")
        return self


def _proxy_url(value: Any) -> Any:
    if isinstance(value, str) and value not in ("", "none", "env"):
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme != "http":
            raise ValueError(f"expected an http:// proxy URL, 'env' or 'none', got {value!r}")
    return value


class Target(ScenarioModel):
    """The endpoint under test. The API key is read from the environment, never stored."""

    url: AnyHttpUrl = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(
        "", description="Model name sent in every request; when empty, the pre-flight picks the target's only model."
    )
    endpoint: Endpoint = Field(
        "chat", description="/chat/completions, /completions or /embeddings."
    )
    stream: bool = Field(True, description="Stream with SSE (needed for TTFT and ITL).")
    api_key_env: str | None = Field(None, description="NAME of the environment variable holding the API key.")
    headers: Headers = Field(default_factory=dict, description="Extra HTTP headers (one line of ASCII text each).")
    session_header: HeaderName | None = Field(
        None, description="Send this header, e.g. X-Session-ID, on every request of a multi-turn session with the "
        "session's id (the records' session column), for a router that pins sessions to replicas; off when unset.",
    )  # fmt: skip
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
    retry: Retry | None = Field(None, description="Retry failed requests (off by default): on, max_attempts, budget, backoff.")
    tls: Tls = Tls()
    proxy: Annotated[str, BeforeValidator(_proxy_url)] = Field(
        "env",
        description="HTTP proxy for the target: 'env' (HTTPS_PROXY / HTTP_PROXY / NO_PROXY, as curl reads them), 'none', or http://[user:pass@]host:port. HTTPS goes through it with CONNECT.",
    )
    redirects: int = Field(
        0, ge=0, le=10, description="Redirects (307/308, and 301-303 for GET) followed per request; 0 records a 3xx as http_error with a hint."
    )
    max_response_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="A response body (or a streamed answer's text) larger than this ends the request as protocol_error: memory stays bounded."
    )
    warm_up: Seconds = Field(
        0.0, description="How long the target takes to warm up (model load, CUDA graphs, caches): a load that climbs to "
        "half its peak sooner is warned of before the run (a too-fast ramp reports a false crash).",
    )

    @property
    def base_url(self) -> str:
        return str(self.url).rstrip("/")


class Price(ScenarioModel):
    """What a target costs: per token for an API, per hour for instances you run."""

    input_per_mtok: float | None = Field(None, ge=0, description="Currency per million prompt tokens.")
    output_per_mtok: float | None = Field(None, ge=0, description="Currency per million output tokens.")
    per_hour: float | None = Field(None, ge=0, description="Currency per hour of the deployment (self-hosted).")


class NamedTarget(Target):
    """One of several targets: compared side by side, or sharing live traffic by weight."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Short name, used in records and reports.")
    weight: float = Field(1.0, ge=0, description="Route mode: share of the traffic (e.g. 80 and 20).")
    price: Price | None = None


def inherited(defaults: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """A ``targets:`` entry with every setting of the top-level ``target:`` that it does not give
    itself, as a reader of the file expects: mappings (``timeouts``, ``tls``, ``headers``,
    ``extra_body``, ``retry``) merge key by key, the entry's own value winning at every level."""
    merged = dict(defaults)
    for key, value in entry.items():
        base = merged.get(key)
        merged[key] = inherited(base, value) if isinstance(base, dict) and isinstance(value, dict) else value
    return merged


class Health(ScenarioModel):
    """Health checks that drive failover, as a client-side router or a load balancer would."""

    path: str = Field("/models", description="Checked with GET, relative to the target's base URL.")
    interval: PositiveSeconds = Field(1.0, description="Time between the starts of a target's checks (a fixed cadence).")
    timeout: PositiveSeconds = Field(1.0, description="A slower answer is a failed check.")
    failures: int = Field(3, ge=1, description="Consecutive failures (checks or requests) that take a target out.")
    recovery: int = Field(2, ge=1, description="Consecutive passing checks that bring it back.")
    max_switch_over: PositiveSeconds | None = Field(
        None,
        description="The plan's bound on a switch-over, from a target's first failure to the last request sent to "
        "it (e.g. 30s): judged in summary.json's failover and thresholds, exit 1 when it is not met.",
    )

    def checks_take_out_s(self) -> tuple[float, float]:
        """How long checks alone take to take out a target that hangs, from the hang to the failed check
        that takes it out: ``failures`` checks a period apart (the interval, or the timeout when longer),
        the last ending a timeout after its start, the first of them starting up to an interval after the hang."""
        span = (self.failures - 1) * max(self.interval, self.timeout) + self.timeout
        return span, span + self.interval


class Routing(ScenarioModel):
    """How several ``targets`` share a scenario."""

    mode: Literal["compare", "route"] = Field(
        "compare", description="compare: the identical schedule to every target; route: live traffic split by weight."
    )
    order: Literal["concurrent", "sequential"] = Field(
        "concurrent", description="compare: all targets at once (each its own client share) or one after another."
    )
    health: Health = Health()
    failover: bool = Field(True, description="route: send a down target's share to the healthy ones.")
    record_responses: bool = Field(
        False, description="compare: keep every answer and report how often the targets agree (use deterministic sampling)."
    )
