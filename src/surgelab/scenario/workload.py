"""The scenario's workload: what each request asks for, one class or a weighted mix, and each kind's inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from surgelab.files import scenario_path
from surgelab.kinds import KINDS, KindSpec
from surgelab.scenario.agents import MAX_TASK_REQUESTS, Agent, Tools
from surgelab.scenario.base import Headers, ScenarioModel
from surgelab.scenario.distributions import Distribution, Fixed, TokenCount
from surgelab.scenario.presets import LENGTHS, Preset, with_preset
from surgelab.scenario.slo import Slo
from surgelab.scenario.target import Endpoint
from surgelab.traces import Trace, read_trace_cached

__all__ = [
    "Workload", "RequestClass", "SharedPrefix", "Session", "Dataset", "Kind", "Images", "Audio", "Documents",
    "HttpTemplate", "KindSettings",
]  # fmt: skip


class SharedPrefix(ScenarioModel):
    """A common prompt prefix on a fraction of requests, to exercise prefix caches on purpose."""

    fraction: float = Field(1.0, ge=0, le=1, description="Share of requests that carry the prefix.")
    tokens: int = Field(ge=1, description="Prefix length in tokens.")


class Session(ScenarioModel):
    """Multi-turn conversations: each turn resends the whole history, so the context grows."""

    turns: Distribution = Field(description="Turns per conversation (rounded, 1 to 255).")
    think_time: Distribution = Field(Fixed(value=0.0), description="Pause between an answer and the next turn.")
    previous_response_id: bool = Field(
        False, description="Kind responses: a later turn sends the previous answer's id instead of the history (server-side state)."
    )


class Dataset(ScenarioModel):
    """Prompts (and output lengths, where recorded) taken from a dataset or trace file."""

    path: str = Field(description="JSONL of prompts, ShareGPT JSON, or any format of docs/traces.md; relative to the scenario file.")
    format: Literal["auto", "azure", "burstgpt", "mooncake", "lengths", "jsonl", "sharegpt", "csv"] = "auto"
    columns: dict[str, str] = Field(default_factory=dict, description="Column mapping for custom files.")
    order: Literal["random", "sequential"] = Field("random", description="Draw rows at random (seeded) or in file order, cycling.")

    @field_validator("path")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return scenario_path(value, info, "dataset")

    def read(self) -> Trace:
        """The dataset's rows (cached: the same file is read once per process)."""
        return read_trace_cached(self.path, self.format, tuple(sorted(self.columns.items())))


if TYPE_CHECKING:
    Kind = str  # the registry is filled at run time: a type checker sees a name
else:
    Kind = Literal[KINDS.names]  # every registered kind (surgelab.kinds)


def _kinds(names: tuple[str, ...] | list[str], last: str = "or") -> str:
    """``a, b or c``: the kinds a field applies to."""
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else "".join(names)


_ALL_KINDS = _kinds([f"{k.name} ({k.about})" if k.about else k.name for k in KINDS])


class Images(ScenarioModel):
    """Images per request (vision inputs, or what image_generation asks for); see docs/kinds.md."""

    count: Distribution = Field(Fixed(value=1), description="Images per request (rounded, at least 1).")
    width: Distribution = Field(Fixed(value=512), description="Width in pixels (rounded, at least 16).")
    height: Distribution = Field(Fixed(value=512), description="Height in pixels (rounded, at least 16).")
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


class Audio(ScenarioModel):
    """Audio sent to a transcription endpoint: synthesised WAV of a sampled duration, or files."""

    seconds: Distribution = Field(Fixed(value=5.0), description="Duration of each clip in seconds.")
    sample_rate: int = Field(16000, ge=8000, le=48000, description="Sample rate of the synthesised 16-bit mono WAV.")
    folder: str | None = Field(None, description="Send .wav files from this folder (name order, cycling) instead.")
    language: str | None = Field(None, description="The language field of the request, e.g. en.")

    @field_validator("folder")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else scenario_path(value, info, "audio folder")


class Documents(ScenarioModel):
    """Candidates for a rerank request; the query is the prompt (prompt_tokens long)."""

    count: Distribution = Field(Fixed(value=16), description="Documents per request (rounded, at least 1).")
    tokens: TokenCount = Field(Fixed(value=128), description="Length of each document in tokens.")
    top_n: int | None = Field(None, ge=1, description="Ask for only the best n results.")


class HttpTemplate(ScenarioModel):
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
    headers: Headers = Field(default_factory=dict, description="Extra headers for this request (one line of ASCII text each).")

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


class KindSettings(ScenarioModel):
    """Settings that apply to every request of one kind."""

    slo: Slo = Field(description="Objectives for this kind; unset ones fall back to the scenario's, and only those that fit the kind apply.")


class RequestClass(ScenarioModel):
    """One kind of request in the mix: its lengths, sampling and tier."""

    name: str = Field("default", description="Reported per class in the summary.")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="Relative share of requests (e.g. from production logs).")
    endpoint: Endpoint | None = Field(
        None, description="Overrides target.endpoint for this class (embeddings: the prompt is the input)."
    )
    preset: Preset | None = Field(
        None, description="Named lengths (docs/workload.md#long-context-presets): long-8k, long-32k, long-100k or long-200k prompt "
        "tokens (k = 1000) with 128 output tokens; prompt_tokens or output_tokens given beside it win.",
    )
    prompt_tokens: TokenCount = Field(Fixed(value=256), description="Prompt length in tokens (built-in tokenizer).")
    output_tokens: TokenCount = Field(Fixed(value=128), description="max_tokens of each request.")
    unique_prefix: bool = Field(True, description="Start every prompt with a unique token sequence so prefix caches cannot flatter the result.")
    system_prompt_tokens: int = Field(0, ge=0, description="A shared system prompt of this many tokens, identical in every request.")
    system_prompts: int = Field(
        1, ge=1, le=100_000, description="How many different system prompts (of system_prompt_tokens each): request i has "
        "prompt i mod system_prompts, so with load.users a multiple of it every user keeps one (a shared-prefix group)."
    )
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
        description=f"What the request is (docs/kinds.md): {_ALL_KINDS}; default: endpoint, else target.endpoint.",
    )
    batch_size: Distribution = Field(Fixed(value=1), description="Embeddings: inputs per request, each prompt_tokens long.")
    images: Images | None = Field(None, description="Vision: the images sent; image_generation: count and size asked for.")
    audio: Audio | None = Field(None, description="Transcription: the audio sent.")
    documents: Documents | None = Field(None, description="Rerank: the candidate documents.")
    http: HttpTemplate | None = Field(None, description="Http: the request template (or a preset).")
    flow: list[RequestClass] | None = Field(
        None, min_length=1, description="Flow: the steps of one user action, sent one after the other (each a class without weight)."
    )
    tools: Tools | None = Field(None, description="Chat, responses, messages: offer synthetic tools and answer their calls (docs/agents.md).")
    agent: Agent | None = Field(None, description="Make each request an agentic task: a DAG of steps on a shared context (docs/agents.md).")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return with_preset(data)

    @model_validator(mode="after")
    def _kind_fields(self) -> RequestClass:
        errors = []
        if self.kind is not None and self.endpoint is not None and self.kind != self.endpoint:
            errors.append(f"kind {self.kind!r} and endpoint {self.endpoint!r} disagree: give one of them")
        kind = self.kind or self.endpoint
        spec = KINDS.get(kind)
        named = kind or "the target endpoint"
        for name in _BLOCKS:
            if getattr(self, name) is not None and (spec is None or spec.block != name):
                errors.append(f"{name} applies to kind {_kinds(_owners(name))}, not {named}")
        if not (isinstance(self.batch_size, Fixed) and self.batch_size.value == 1) and not (spec and spec.batches):
            errors.append(f"batch_size applies to kind {_kinds(KINDS.having('batches'))}, not {named}")
        if spec is not None and spec.needs is not None and spec.block is not None and not getattr(self, spec.block):
            errors.append(f"kind {kind} needs {spec.needs}")
        if spec is not None and spec.chain and self.flow:
            names = [step.name for step in self.flow]
            if len(set(names)) != len(names):
                errors.append(f"flow step names must be unique, got {names}")
            for step in self.flow:
                inner = KINDS.get(step.request_kind)
                if (inner is not None and inner.chain) or step.session is not None or step.agent is not None:
                    errors.append(f"flow step {step.name!r} cannot be a flow, a session or an agent")
        if self.session is not None and kind is not None and not (spec and spec.sessions):
            errors.append(f"session applies to {_kinds(KINDS.having('sessions'), 'and')}, not {kind}")
        if self.session is not None and self.session.previous_response_id and not (spec and spec.previous_response_id):
            errors.append(f"session.previous_response_id applies to kind {_kinds(KINDS.having('previous_response_id'))}, "
                          f"not {named}")  # fmt: skip
        errors += self._agent_problems(kind, spec)
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def _agent_problems(self, kind: str | None, spec: KindSpec | None) -> list[str]:
        errors = []
        for name in ("tools", "agent"):
            if getattr(self, name) is not None and kind is not None and not (spec and spec.tools):
                errors.append(f"{name} applies to kind {_kinds(KINDS.having('tools'))}, not {kind}")
        if self.agent is not None:
            if self.session is not None:
                errors.append("a class is an agent or a session, not both")
            if any(step.tools for step in self.agent.steps) and self.tools is None:
                errors.append("an agent step with tools: true needs the class's tools")
            if self.agent.replay is not None and self.tools is not None:
                errors.append("an agent replay waits out its recorded tool calls: give no tools beside it")
            rounds = self.tools.max_rounds if self.tools else 0
            if self.agent.requests(rounds) > MAX_TASK_REQUESTS:
                errors.append(f"an agent task may make {self.agent.requests(rounds)} requests (steps × fanout × tool rounds); "
                              f"at most {MAX_TASK_REQUESTS}")  # fmt: skip
        return errors

    @property
    def request_kind(self) -> str | None:
        """The kind this class sends; None: the target's endpoint."""
        return self.kind or self.endpoint


_CLASS_FIELDS = set(RequestClass.model_fields) - {"name", "weight"}
_BLOCKS = [name for name in RequestClass.model_fields if name in {spec.block for spec in KINDS}]  # in the schema's order


def _owners(block: str) -> tuple[str, ...]:
    return tuple(spec.name for spec in KINDS if spec.block == block)


def _inherited(defaults: dict[str, Any], request_class: Any) -> Any:
    """A mix class with the workload's fields it does not set; its own preset's lengths beat inherited ones."""
    if not isinstance(request_class, dict):
        return request_class
    if "preset" in request_class:
        defaults = {k: v for k, v in defaults.items() if k not in LENGTHS}
    return {**defaults, **request_class}


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
            data = {**data, "mix": [_inherited(defaults, c) for c in data["mix"]]}
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
