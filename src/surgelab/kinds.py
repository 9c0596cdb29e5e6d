"""The request kinds: one spec per kind, in the one registry every package reads them from.

A kind is what a request is (chat, embeddings, transcription…). Its spec says, once, what the
rest of surgelab would otherwise list by hand: the scenario reads which kinds exist, which may be
a target's ``endpoint``, the workload block each owns and what else it allows (batches, sessions,
tools); the workload reads its builder and the server template its text goes through; the client
its adapter, and whether it is a chain of other requests; the analysis its units, whether its
tokens stream and which objectives fit it; the embedded server its engine cost.

Behaviour is written in the layer that owns it and named here as a hook, ``"module:attribute"``,
which that layer resolves (``KindSpec.hook``): a builder in ``surgelab.workload``, an adapter in
``surgelab.client``, a cost in ``surgelab.engine``. So this module imports nothing of surgelab,
every layer can read it, and the simulator reads it without loading the HTTP client.
docs/architecture.md shows a kind added: one module and one line here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any, Literal

__all__ = ["KINDS", "KindSpec", "Registry", "SloField"]

SloField = Literal["ttft", "itl", "tpot", "e2e"]


@dataclass(frozen=True)
class KindSpec:
    """One request kind: its name, its inputs, how it is built and sent, and how it is counted."""

    name: str
    about: str = ""  # shown after the name where kinds are listed, e.g. "OpenAI Responses API"
    # the scenario
    endpoint: bool = False  # may be target.endpoint (and a class's endpoint)
    block: str | None = None  # the workload block holding its inputs (a field of RequestClass)
    needs: str | None = None  # the block is required: what the error asks for
    batches: bool = False  # batch_size applies
    sessions: bool = False  # may be the turns of a session
    tools: bool = False  # may offer tools and be an agent's step
    previous_response_id: bool = False  # a session's later turn may send the previous answer's id
    # the workload
    builder: str | None = None  # hook: fills the spec's payload and input_units (workload/kinds.py)
    prepare: str | None = None  # hook: pre-builds what its media is cut from, before the run
    template: Literal["chat", "completions"] | None = None  # the server template its text is wrapped in
    # the client
    adapter: str | None = None  # hook: the HTTP call and how its answer fills the record (client/kinds/)
    chain: bool = False  # a chain of other kinds' requests (flow), sent by the client step by step
    prompt_tokens: bool = True  # its spec knows its prompt tokens (transcription's prompt is audio)
    # the analysis
    streams: bool = False  # its tokens stream when target.stream is on: TTFT, ITL and TPOT apply
    first_token: bool = False  # its records have a first token (streamed text, first audio byte, last step)
    input_tokens: bool = False  # its throughput counts input tokens
    output_tokens: bool = False  # its throughput counts output tokens
    unit: tuple[str, str] | None = None  # (its throughput field, the record column it sums)
    figures: tuple[str, ...] = ()  # its own blocks in by_kind (analysis/kinds.py): ttfa, real_time_factor…
    # the embedded server
    cost: str | None = None  # hook: the engine work one request makes (engine/media.py)

    def hook(self, name: Literal["builder", "prepare", "adapter", "cost"]) -> Any:
        """The object a hook names (resolved once), or None where the kind has none."""
        path = getattr(self, name)
        return None if path is None else _resolve(path)

    def slo_fields(self, stream: bool) -> tuple[SloField, ...]:
        """The objectives that fit it: TTFT where there is a first token, ITL and TPOT where tokens stream."""
        streamed = ("itl", "tpot") if stream and self.streams else ()
        return (*(("ttft",) if self.first_token else ()), *streamed, "e2e")


@cache
def _resolve(path: str) -> Any:
    module, _, attribute = path.partition(":")
    return getattr(import_module(module), attribute)


class Registry:
    """The kinds in the order they are listed (the scenario's schema, docs/scenario.md)."""

    def __init__(self, *specs: KindSpec) -> None:
        self._specs: dict[str, KindSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: KindSpec) -> None:
        """Add a kind. The scenario's schema is made when ``surgelab.scenario`` is imported: register before."""
        if spec.name in self._specs:
            raise ValueError(f"kind {spec.name!r} is registered already")
        self._specs[spec.name] = spec

    def __getitem__(self, name: str) -> KindSpec:
        return self._specs[name]

    def get(self, name: str | None) -> KindSpec | None:
        """The spec of ``name``; None for none (a class without a kind: the target's endpoint) or an unknown one."""
        return self._specs.get(name) if name else None

    def __iter__(self) -> Iterator[KindSpec]:
        return iter(self._specs.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def having(self, flag: str) -> tuple[str, ...]:
        """The names of the kinds whose ``flag`` is set, e.g. ``having("tools")``."""
        return tuple(spec.name for spec in self if getattr(spec, flag))


def _text(name: str, **fields: Any) -> KindSpec:
    """A kind whose answer is generated text: a session's turn, streamed, counted in tokens in and out."""
    return KindSpec(
        name, sessions=True, streams=True, first_token=True, input_tokens=True, output_tokens=True, **fields
    )


_CLIENT, _WORKLOAD, _ENGINE = "surgelab.client.kinds.", "surgelab.workload.kinds:", "surgelab.engine.media:"

KINDS = Registry(
    _text("chat", endpoint=True, tools=True, template="chat", adapter=_CLIENT + "text:Chat"),
    _text("completions", endpoint=True, template="completions", adapter=_CLIENT + "text:Completions"),
    KindSpec("embeddings", endpoint=True, batches=True, builder=_WORKLOAD + "embeddings",
             adapter=_CLIENT + "embeddings:Embeddings", input_tokens=True, unit=("inputs_per_s", "input_units")),
    _text("vision", block="images", builder=_WORKLOAD + "vision", prepare=_WORKLOAD + "prepare_vision",
          adapter=_CLIENT + "text:Vision", unit=("images_per_s", "input_units")),
    KindSpec("transcription", block="audio", builder=_WORKLOAD + "transcription",
             prepare=_WORKLOAD + "prepare_transcription", adapter=_CLIENT + "audio:Transcription", prompt_tokens=False,
             output_tokens=True, unit=("audio_s_per_s", "input_units"), figures=("real_time_factor",),
             cost=_ENGINE + "transcription_tokens"),
    KindSpec("image_generation", block="images", builder=_WORKLOAD + "image_generation",
             adapter=_CLIENT + "images:ImageGeneration", unit=("images_per_s", "output_units"),
             cost=_ENGINE + "diffusion_tokens"),
    KindSpec("rerank", block="documents", builder=_WORKLOAD + "rerank", adapter=_CLIENT + "rerank:Rerank",
             input_tokens=True, unit=("documents_per_s", "input_units")),
    KindSpec("speech", adapter=_CLIENT + "audio:Speech", first_token=True, unit=("audio_s_per_s", "output_units"),
             figures=("ttfa", "audio_s_per_s"), cost=_ENGINE + "speech_tokens"),
    KindSpec("flow", block="flow", needs="flow: a list of steps", builder=_WORKLOAD + "flow", chain=True,
             first_token=True, input_tokens=True, output_tokens=True, unit=("steps_per_s", "input_units"),
             figures=("steps",)),
    KindSpec("http", block="http", needs="an http template (method, path, body) or http: {preset: kserve_v2}",
             builder=_WORKLOAD + "http", adapter=_CLIENT + "http:Http", unit=("response_bytes_per_s", "output_units")),
    _text("responses", about="OpenAI Responses API", tools=True, previous_response_id=True, template="chat",
          adapter=_CLIENT + "responses:Responses"),
    _text("messages", about="Anthropic Messages API", tools=True, template="chat", adapter=_CLIENT + "messages:Messages"),
)  # fmt: skip
"""Every kind surgelab knows; adding one is a line here (and the modules its hooks name)."""
