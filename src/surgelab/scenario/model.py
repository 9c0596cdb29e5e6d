"""The scenario schema: what to hit, how hard, with what, and what counts as passing.

Config is pure data: no clocks, RNGs or connections live here (they belong to the runner).
Every duration accepts unit strings (``30s``, ``250ms``) and is stored in seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from surgelab.conditions import Threshold
from surgelab.files import scenario_path
from surgelab.load.arrivals import Arrival
from surgelab.load.shapes import Shape
from surgelab.scenario.calibration import TokenizerCalibration
from surgelab.units import parse_duration, parse_ratio
from surgelab.workload.distributions import Distribution

__all__ = [
    "Scenario", "Target", "Timeouts", "Load", "Workload", "RequestClass", "SharedPrefix", "Session", "Dataset", "Slo", "Tier",
    "Phase", "Validity", "Output", "Telemetry", "TelemetrySource", "NamedTarget", "Price", "Health", "Routing",
    "Retry", "Backoff", "Guards", "Abort",
]  # fmt: skip

DEFAULT_DURATION_S = 60.0
Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, validate_default=True)


class Timeouts(_Model):
    """Each expiry ends the request in state ``timeout`` with the stage named in its error."""

    connect: PositiveSeconds = Field(10.0, description="TCP (and TLS) connection set-up.")
    first_token: PositiveSeconds = Field(60.0, description="From send to the first content token.")
    total: PositiveSeconds = Field(300.0, description="From send to the end of the response.")


class Backoff(_Model):
    """Wait before a retry: ``base × 2^(attempt−1)``, at most ``max``, and never less than a Retry-After."""

    base: Seconds = Field(0.1, description="Wait before the first retry.")
    max: Seconds = Field(5.0, description="Longest wait between attempts.")
    honour_retry_after: bool = Field(True, description="Wait at least the server's Retry-After (seconds or an HTTP date).")


RetryOn = Annotated[int, Field(ge=400, le=599)] | Literal["connection_error", "timeout"]


class Retry(_Model):
    """An optional retry policy, off unless given. Every request still ends in one state (its last
    attempt's); the records count its attempts. Bodies sent as multipart (transcription) are not retried."""

    on: list[RetryOn] = Field(
        default_factory=lambda: [429, 503, "connection_error"],
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


class Target(_Model):
    """The endpoint under test. The API key is read from the environment, never stored."""

    url: AnyHttpUrl = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(description="Model name sent in every request.")
    endpoint: Literal["chat", "completions", "embeddings"] = Field(
        "chat", description="/chat/completions, /completions or /embeddings."
    )
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
    retry: Retry | None = Field(None, description="Retry failed requests (off by default): on, max_attempts, budget, backoff.")
    max_response_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="A response body (or a streamed answer's text) larger than this ends the request as protocol_error: memory stays bounded."
    )

    @property
    def base_url(self) -> str:
        return str(self.url).rstrip("/")


class Price(_Model):
    """What a target costs: per token for an API, per hour for instances you run."""

    input_per_mtok: float | None = Field(None, ge=0, description="Currency per million prompt tokens.")
    output_per_mtok: float | None = Field(None, ge=0, description="Currency per million output tokens.")
    per_hour: float | None = Field(None, ge=0, description="Currency per hour of the deployment (self-hosted).")


class NamedTarget(Target):
    """One of several targets: compared side by side, or sharing live traffic by weight."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Short name, used in records and reports.")
    weight: float = Field(1.0, ge=0, description="Route mode: share of the traffic (e.g. 80 and 20).")
    price: Price | None = None


class Health(_Model):
    """Health checks that drive failover, as a client-side router or a load balancer would."""

    path: str = Field("/models", description="Checked with GET, relative to the target's base URL.")
    interval: PositiveSeconds = Field(1.0, description="Time between checks.")
    timeout: PositiveSeconds = Field(1.0, description="A slower answer is a failed check.")
    failures: int = Field(3, ge=1, description="Consecutive failures (checks or requests) that take a target out.")
    recovery: int = Field(2, ge=1, description="Consecutive passing checks that bring it back.")


class Routing(_Model):
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


class Load(_Model):
    """Open loop (``rate``) or closed loop (``concurrency``); exactly one of the two.

    Either is a number (a steady level) or a shape: step, ramp, spike, wave, stages or
    breakpoint (see the shapes section below).
    """

    rate: Shape | None = Field(None, description="Open loop: requests per second, a number or a shape.")
    arrival: Arrival = Field(Arrival.POISSON, description="Open loop: constant, poisson or gamma arrivals.")
    cv: float = Field(1.0, gt=0, allow_inf_nan=False, description="Gamma arrivals: coefficient of variation of the gaps.")
    concurrency: Shape | None = Field(None, description="Closed loop: number of virtual users, a number or a shape.")
    think_time: Distribution = Field(0.0, description="Closed loop: pause between a response and the user's next request.")
    ramp_up: Seconds = Field(
        0.0, description="Closed loop with a steady level: users start evenly spread over this time (a shape sets its own)."
    )
    duration: PositiveSeconds | None = Field(
        None, description="How long to send for; defaults to the shape's own length, or 60 s for steady and wave loads."
    )
    warmup: Seconds = Field(0.0, description="Initial period recorded but excluded from the summary.")
    max_in_flight: int = Field(1000, ge=1, description="Open loop: a request that would exceed this is dropped and counted.")
    grace: Seconds = Field(10.0, description="On stop, how long in-flight requests may finish before they are cancelled.")

    @model_validator(mode="after")
    def _one_mode(self) -> Load:
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError("give exactly one of rate (open loop) or concurrency (closed loop)")
        if self.concurrency is not None and self.concurrency.type == "replay":
            raise ValueError("a replay sets arrival times: use it as rate (open loop), not concurrency")
        if self.warmup >= self.planned_duration:
            raise ValueError(f"warmup ({self.warmup:g}s) must be shorter than duration ({self.planned_duration:g}s)")
        return self

    @property
    def mode(self) -> Literal["open", "closed"]:
        return "open" if self.rate is not None else "closed"

    @property
    def shape(self) -> Any:
        """The level over time (requests/s or users)."""
        return self.rate if self.rate is not None else self.concurrency

    @property
    def planned_duration(self) -> float:
        if self.duration is not None:
            return self.duration
        natural = self.shape.natural_duration
        return float(natural) if natural is not None else DEFAULT_DURATION_S

    def describe(self) -> str:
        unit = "req/s" if self.mode == "open" else "users"
        return f"{self.shape.describe()} {unit}"


class SharedPrefix(_Model):
    """A common prompt prefix on a fraction of requests, to exercise prefix caches on purpose."""

    fraction: float = Field(1.0, ge=0, le=1, description="Share of requests that carry the prefix.")
    tokens: int = Field(ge=1, description="Prefix length in tokens.")


class Session(_Model):
    """Multi-turn conversations: each turn resends the whole history, so the context grows."""

    turns: Distribution = Field(description="Turns per conversation (rounded, 1 to 255).")
    think_time: Distribution = Field(0.0, description="Pause between an answer and the next turn.")


class Dataset(_Model):
    """Prompts (and output lengths, where recorded) taken from a dataset or trace file."""

    path: str = Field(description="JSONL of prompts, ShareGPT JSON, or any format of docs/traces.md; relative to the scenario file.")
    format: Literal["auto", "azure", "burstgpt", "mooncake", "lengths", "jsonl", "sharegpt", "csv"] = "auto"
    columns: dict[str, str] = Field(default_factory=dict, description="Column mapping for custom files.")
    order: Literal["random", "sequential"] = Field("random", description="Draw rows at random (seeded) or in file order, cycling.")

    @field_validator("path")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return scenario_path(value, info, "dataset")


Kind = Literal["chat", "completions", "embeddings", "vision", "transcription", "image_generation", "rerank", "speech", "flow", "http"]
KINDS: tuple[str, ...] = get_args(Kind)
_TEXT_KINDS = ("chat", "completions")


class Images(_Model):
    """Images per request (vision inputs, or what image_generation asks for); see docs/kinds.md."""

    count: Distribution = Field(1, description="Images per request (rounded, at least 1).")
    width: Distribution = Field(512, description="Width in pixels (rounded, at least 16).")
    height: Distribution = Field(512, description="Height in pixels (rounded, at least 16).")
    format: Literal["png", "jpeg"] = Field("jpeg", description="Vision: encoding of the synthesised images.")
    quality: int = Field(85, ge=1, le=100, description="Vision: JPEG quality (Pillow's scale, 1-100).")
    folder: str | None = Field(
        None, description="Vision: send images from this folder (PNG/JPEG files, in name order, cycling) instead of synthesising them."
    )
    detail: Literal["auto", "low", "high"] = Field("auto", description="Vision: the image_url detail sent.")
    tokens: Literal["openai", "qwen2vl", "patch14"] = Field(
        "openai", description="Vision: the formula that estimates image tokens (docs/kinds.md)."
    )

    @field_validator("folder")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else scenario_path(value, info, "image folder")


class Audio(_Model):
    """Audio sent to a transcription endpoint: synthesised WAV of a sampled duration, or files."""

    seconds: Distribution = Field(5.0, description="Duration of each clip in seconds.")
    sample_rate: int = Field(16000, ge=8000, le=48000, description="Sample rate of the synthesised 16-bit mono WAV.")
    folder: str | None = Field(None, description="Send .wav files from this folder (name order, cycling) instead.")
    language: str | None = Field(None, description="The language field of the request, e.g. en.")

    @field_validator("folder")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else scenario_path(value, info, "audio folder")


class Documents(_Model):
    """Candidates for a rerank request; the query is the prompt (prompt_tokens long)."""

    count: Distribution = Field(16, description="Documents per request (rounded, at least 1).")
    tokens: Distribution = Field(128, description="Length of each document in tokens.")
    top_n: int | None = Field(None, ge=1, description="Ask for only the best n results.")


class HttpTemplate(_Model):
    """A templated request to any HTTP inference API; placeholders in {braces} are filled per request.

    Placeholders: {prompt}, {prompt_tokens}, {max_tokens}, {index}, {model}, {request_class}. A
    string that is exactly one placeholder takes the value's own type (a number stays a number).
    """

    preset: Literal["kserve_v2"] | None = Field(
        None, description="kserve_v2: POST /v2/models/{model}/infer with the prompt as a BYTES tensor (KServe, Triton)."
    )
    method: Literal["GET", "POST", "PUT"] = Field("POST", description="HTTP method.")
    path: str | None = Field(None, description="Path from the target URL's origin (starting with /), or a full URL.")
    body: Any = Field(None, description="JSON body with placeholders; none for GET.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra headers for this request.")

    @model_validator(mode="after")
    def _complete(self) -> HttpTemplate:
        if self.preset is None and self.path is None:
            raise ValueError("http needs a path (or preset: kserve_v2)")
        return self

    @property
    def resolved(self) -> HttpTemplate:
        """The template with the preset's path and body where none were given."""
        if self.preset != "kserve_v2":
            return self
        body = self.body if self.body is not None else {
            "inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES", "data": ["{prompt}"]},
                       {"name": "max_tokens", "shape": [1], "datatype": "INT32", "data": ["{max_tokens}"]}],
        }  # fmt: skip
        return self.model_copy(update={"path": self.path or "/v2/models/{model}/infer", "body": body})


class KindSettings(_Model):
    """Settings that apply to every request of one kind."""

    slo: Slo = Field(description="Objectives for this kind; unset ones fall back to the scenario's, and only those that fit the kind apply.")


class RequestClass(_Model):
    """One kind of request in the mix: its lengths, sampling and tier."""

    name: str = Field("default", description="Reported per class in the summary.")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="Relative share of requests (e.g. from production logs).")
    endpoint: Literal["chat", "completions", "embeddings"] | None = Field(
        None, description="Overrides target.endpoint for this class (embeddings: the prompt is the input)."
    )
    prompt_tokens: Distribution = Field(256, description="Prompt length in tokens (built-in tokenizer).")
    output_tokens: Distribution = Field(128, description="max_tokens of each request.")
    unique_prefix: bool = Field(True, description="Start every prompt with a unique token sequence so prefix caches cannot flatter the result.")
    system_prompt_tokens: int = Field(0, ge=0, description="A shared system prompt of this many tokens, identical in every request.")
    shared_prefix: SharedPrefix | None = Field(None, description="A shared prefix on a fraction of requests.")
    sampling: dict[str, Any] = Field(default_factory=dict, description="Extra body fields for this class, e.g. {temperature: 0.7}.")
    tier: str = Field("default", description="Tier whose SLOs apply (see tiers).")
    session: Session | None = Field(None, description="Make each request the first turn of a conversation.")
    dataset: Dataset | None = Field(
        None, description="Prompts from a dataset: its texts (or its lengths, synthesised); its output lengths where it has them."
    )
    think_time: Distribution | None = Field(
        None, description="With workload.assign: user, this profile's think time (instead of load.think_time)."
    )
    kind: Kind | None = Field(
        None,
        description="What the request is (docs/kinds.md): chat, completions, embeddings, vision, transcription, "
        "image_generation, rerank, speech, flow or http; default: endpoint, else target.endpoint.",
    )
    batch_size: Distribution = Field(1, description="Embeddings: inputs per request, each prompt_tokens long.")
    images: Images | None = Field(None, description="Vision: the images sent; image_generation: count and size asked for.")
    audio: Audio | None = Field(None, description="Transcription: the audio sent.")
    documents: Documents | None = Field(None, description="Rerank: the candidate documents.")
    http: HttpTemplate | None = Field(None, description="Http: the request template (or a preset).")
    flow: list[RequestClass] | None = Field(
        None, min_length=1, description="Flow: the steps of one user action, sent one after the other (each a class without weight)."
    )

    @model_validator(mode="after")
    def _kind_fields(self) -> RequestClass:
        errors = []
        if self.kind is not None and self.endpoint is not None and self.kind != self.endpoint:
            errors.append(f"kind {self.kind!r} and endpoint {self.endpoint!r} disagree: give one of them")
        kind = self.kind or self.endpoint
        owners = {"images": ("vision", "image_generation"), "audio": ("transcription",), "documents": ("rerank",),
                  "http": ("http",), "flow": ("flow",)}  # fmt: skip
        for name, kinds in owners.items():
            if getattr(self, name) is not None and kind not in kinds:
                errors.append(f"{name} applies to kind {' or '.join(kinds)}, not {kind or 'the target endpoint'}")
        if not (getattr(self.batch_size, "dist", "") == "fixed" and self.batch_size.value == 1) and kind != "embeddings":
            errors.append(f"batch_size applies to kind embeddings, not {kind or 'the target endpoint'}")
        if kind == "http" and self.http is None:
            errors.append("kind http needs an http template (method, path, body) or http: {preset: kserve_v2}")
        if kind == "flow":
            if not self.flow:
                errors.append("kind flow needs flow: a list of steps")
            else:
                names = [step.name for step in self.flow]
                if len(set(names)) != len(names):
                    errors.append(f"flow step names must be unique, got {names}")
                for step in self.flow:
                    if (step.kind or step.endpoint) == "flow" or step.session is not None:
                        errors.append(f"flow step {step.name!r} cannot be a flow or a session")
        if self.session is not None and kind not in (None, *_TEXT_KINDS, "vision"):
            errors.append(f"session applies to chat, completions and vision, not {kind}")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @property
    def request_kind(self) -> str | None:
        """The kind this class sends; None: the target's endpoint."""
        return self.kind or self.endpoint


_CLASS_FIELDS = set(RequestClass.model_fields) - {"name", "weight"}


class Workload(RequestClass):
    """What each request asks for: one class, or a weighted ``mix`` of classes.

    With a ``mix``, the fields given here are defaults that every class inherits unless it
    sets its own.
    """

    mix: list[RequestClass] | None = Field(None, min_length=1, description="Weighted request classes.")
    assign: Literal["request", "user"] = Field(
        "request",
        description="request: every request draws its class; user: every closed-loop user draws one class (its profile) and keeps it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _inherit(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("mix"), list):
            defaults = {k: v for k, v in data.items() if k in _CLASS_FIELDS}
            data = {**data, "mix": [{**defaults, **c} if isinstance(c, dict) else c for c in data["mix"]]}
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> Workload:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"request class names must be unique, got {names}")
        return self

    @property
    def classes(self) -> list[RequestClass]:
        if self.mix:
            return list(self.mix)
        return [RequestClass(**{k: getattr(self, k) for k in RequestClass.model_fields})]


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


class TelemetrySource(_Model):
    """A Prometheus endpoint to scrape during the run: the target's /metrics, a DCGM or node exporter."""

    url: AnyHttpUrl = Field(description="e.g. http://127.0.0.1:8000/metrics")
    name: str | None = Field(None, description="Label in telemetry.parquet and the summary (default: host:port).")
    preset: Literal["auto", "all", "vllm", "sglang", "tgi", "triton", "llamacpp", "dcgm", "node"] = Field(
        "auto", description="Which series to keep: a server's useful ones (auto detects), or all."
    )
    series: list[str] = Field(default_factory=list, description="More metric families to keep (* wildcards).")
    timeout: PositiveSeconds = Field(2.0, description="A slower answer is a failed scrape, never a slower run.")

    @property
    def label(self) -> str:
        return self.name or f"{self.url.host}:{self.url.port}"


class Telemetry(_Model):
    """Server and GPU metrics scraped while the run goes on (docs/telemetry.md)."""

    sources: list[TelemetrySource] = Field(default_factory=list)
    interval: PositiveSeconds = Field(1.0, description="Time between scrapes.")
    nvml: bool = Field(False, description="Also sample this machine's NVIDIA GPUs through NVML (extra surgelab[gpu]).")


Ratio = Annotated[float, BeforeValidator(lambda v: parse_ratio(v) if isinstance(v, str) else v), Field(ge=0, le=1)]


class Abort(_Model):
    """Conditions that stop a run before it becomes the outage; each is checked on the requests that
    ended in the last ``window`` (set one to null to switch it off). The stop reason names it and
    ``surgelab run`` exits with 1."""

    error_rate: Ratio | None = Field(0.9, description="Stop when this share of the requests that ended in the window failed.")
    consecutive_failures: int | None = Field(1000, ge=1, description="Stop after this many failures in a row.")
    p99_over_slo: float | None = Field(
        None, gt=1, allow_inf_nan=False,
        description="Stop when the window's P99 TTFT or E2E passes this multiple of its SLO (needs slo.ttft or slo.e2e).",
    )
    window: PositiveSeconds = Field(10.0, description="How far back error_rate and p99_over_slo look.")
    min_requests: int = Field(200, ge=1, description="error_rate and p99_over_slo need this many requests in the window.")


class Guards(_Model):
    """Hard caps that keep a typo from flooding a production service, and abort conditions.

    A scenario above a cap is refused at validation; raise the cap here explicitly, or lift
    every cap with ``unlimited: true`` (``surgelab run --i-know-what-i-am-doing``)."""

    max_rate: float = Field(2000.0, gt=0, allow_inf_nan=False, description="Highest open-loop rate, requests/s (phases that may overlap are added up).")
    max_concurrency: int = Field(5000, ge=1, description="Most closed-loop virtual users (phases added up).")
    max_duration: PositiveSeconds = Field(86400.0, description="Longest planned run.")
    unlimited: bool = Field(False, description="Lift the three caps (abort conditions still apply).")
    abort: Abort = Abort()


class Tier(_Model):
    """A customer tier with its own objectives (e.g. paid and free)."""

    slo: Slo = Field(Slo(), description="Objectives for this tier's requests; unset ones fall back to the scenario's.")


class Phase(_Model):
    """A part of the scenario with its own load and mix, starting at an offset (k6's startTime)."""

    name: str = Field(description="Reported per phase in the summary.")
    start: Seconds = Field(0.0, description="Offset from the start of the run.")
    jitter: Seconds = Field(0.0, description="A random extra delay in [0, jitter) so phases do not fire in the same second.")
    load: Load
    workload: Workload | None = Field(None, description="This phase's mix; the scenario's workload when absent.")


class Scenario(_Model):
    """A complete, reproducible test: the resolved form is saved in every run directory."""

    name: str = Field("run", description="Names the run (and its default directory).")
    description: str = Field("", description="Free text for people reading the scenario.")
    seed: int = Field(0, ge=0, description="Fixes the arrival schedule and the workload: same seed, same requests.")
    prompt_salt: int | None = Field(
        None, ge=0,
        description="Mixed into every unique prompt prefix. Unset: a fresh one per run (saved in the run's "
        "scenario.yaml), so a rerun against a warm server cannot hit its prefix cache; set it to resend a run's exact prompts.",
    )  # fmt: skip
    target: Target = Field(description="The endpoint under test (with targets: the first of them, unless given).")
    targets: list[NamedTarget] | None = Field(None, min_length=2, description="Several endpoints (see routing).")
    routing: Routing = Field(Routing(), description="With targets: compare them, or route traffic between them.")
    load: Load | None = Field(None, description="How hard: open-loop rate or closed-loop users, duration, warm-up.")
    phases: list[Phase] | None = Field(None, min_length=1, description="Instead of load: several phases, each with its own load and mix.")
    workload: Workload = Field(Workload(), description="What each request asks for.")
    tokenizer: str = Field(
        "auto",
        description="How prompt lengths are counted. auto: the target's own tokenizer, chat template included, "
        "learned from its /tokenize (vLLM, SGLang, llama.cpp, surgelab serve) before the run, else builtin; server: the "
        "same, and an error when the target cannot tokenize; builtin; or a Hugging Face tokenizer.json (or a folder "
        "with one), a relative path being relative to the scenario file.",
    )
    tokenizer_calibration: TokenizerCalibration | None = Field(
        None, description="Filled in by surgelab when it learned the target's tokenizer (tokenizer: auto or server)."
    )
    slo: Slo = Field(Slo(), description="Per-request objectives that define goodput.")
    telemetry: Telemetry = Field(Telemetry(), description="Prometheus endpoints to scrape during the run.")
    tiers: dict[str, Tier] = Field(default_factory=dict, description="Named tiers with their own SLOs, referred to by request classes.")
    kinds: dict[Kind, KindSettings] = Field(
        default_factory=dict, description="Per-kind settings, e.g. {transcription: {slo: {e2e: 3s}}} (docs/kinds.md)."
    )
    thresholds: list[Threshold] = Field(default_factory=list, description="Pass/fail criteria (see below).")
    validity: Validity = Field(Validity(), description="When the run's own numbers cannot be trusted.")
    output: Output = Field(Output(), description="Where and how often results are written.")
    guards: Guards = Field(Guards(), description="Caps on rate, users and duration, and conditions that abort the run.")

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_path(cls, value: str, info: ValidationInfo) -> str:
        return value if value in ("auto", "builtin", "server") else scenario_path(value, info, "tokenizer")

    @model_validator(mode="before")
    @classmethod
    def _primary_target(cls, data: Any) -> Any:
        """With ``targets`` and no ``target``, the first named target is the primary one."""
        if isinstance(data, dict) and "target" not in data and isinstance(data.get("targets"), list) and data["targets"]:
            first = data["targets"][0]
            if isinstance(first, dict):
                data = {**data, "target": {k: v for k, v in first.items() if k not in ("name", "weight", "price")}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if (self.load is None) == (self.phases is None):
            raise ValueError("give exactly one of load (a single phase) or phases")
        names = [p.name for p in self.phase_list]
        if len(set(names)) != len(names):
            raise ValueError(f"phase names must be unique, got {names}")
        if self.targets:
            target_names = [t.name for t in self.targets]
            if len(set(target_names)) != len(target_names):
                raise ValueError(f"target names must be unique, got {target_names}")
            if self.routing.mode == "route" and not any(t.weight > 0 for t in self.targets):
                raise ValueError("route mode needs at least one target with a weight above 0")
        for phase in self.phase_list:
            for c in (phase.workload or self.workload).classes:
                if c.tier != "default" and c.tier not in self.tiers:
                    raise ValueError(f"request class {c.name!r} names tier {c.tier!r}, which is not in tiers")
        self._within_guards()
        return self

    def _within_guards(self) -> None:
        guards = self.guards
        if guards.unlimited:
            return
        phases = self.phase_list
        where = "load" if self.load is not None else "phases"
        rate = sum(p.load.shape.peak for p in phases if p.load.mode == "open")
        users = sum(p.load.shape.peak for p in phases if p.load.mode == "closed")
        problems = []
        if rate > guards.max_rate:
            problems.append(f"{where}: a peak of {rate:g} req/s is above guards.max_rate ({guards.max_rate:g})")
        if users > guards.max_concurrency:
            problems.append(f"{where}: {users:g} users is above guards.max_concurrency ({guards.max_concurrency})")
        if self.planned_duration > guards.max_duration:
            problems.append(f"{where}: {self.planned_duration:g}s is longer than guards.max_duration ({guards.max_duration:g}s)")
        if problems:
            raise ValueError(
                "; ".join(problems) + " — raise the guard in the scenario's guards section, or pass --i-know-what-i-am-doing"
            )

    @property
    def phase_list(self) -> list[Phase]:
        """The phases to run; a scenario with a single ``load`` is one phase named ``main``."""
        if self.phases:
            return list(self.phases)
        assert self.load is not None
        return [Phase(name="main", load=self.load)]

    def workload_of(self, phase: Phase) -> Workload:
        return phase.workload or self.workload

    def slo_of_kind(self, kind: str) -> Slo:
        """A kind's objectives, each unset one falling back to the scenario's."""
        own = self.kinds.get(kind)  # type: ignore[call-overload]
        if own is None:
            return self.slo
        merged = {k: v if v is not None else getattr(self.slo, k) for k, v in own.slo.model_dump().items()}
        return Slo(**merged)

    def slo_of(self, tier: str) -> Slo:
        """A tier's objectives, each unset one falling back to the scenario's."""
        own = self.tiers.get(tier)
        if own is None:
            return self.slo
        merged = {k: v if v is not None else getattr(self.slo, k) for k, v in own.slo.model_dump().items()}
        return Slo(**merged)

    @property
    def planned_duration(self) -> float:
        """Until the last phase ends (jitter included at its maximum)."""
        return max(p.start + p.jitter + p.load.planned_duration for p in self.phase_list)
