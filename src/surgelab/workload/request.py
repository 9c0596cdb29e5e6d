"""The request spec: everything a client needs to send one request, decided before sending."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestSpec", "ToolResult"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call of the previous answer and what the (synthetic) tool answered it."""

    call_id: str
    name: str
    arguments: str  # the call's JSON arguments, as the model sent them
    output: str


@dataclass(frozen=True, slots=True)
class RequestSpec:
    prompt: str
    prompt_tokens: int  # as counted by the workload's tokenizer, system prompt and history included
    max_tokens: int
    system_prompt: str = ""
    request_class: str = "default"
    tier: str = "default"
    endpoint: str | None = None  # None: the target's endpoint
    extra: Mapping[str, Any] = field(default_factory=dict)  # per-class body fields (sampling)
    history: tuple[tuple[str, str], ...] = ()  # earlier (user, assistant) turns of a session
    keep_text: bool = False  # the client keeps the answer text (a session needs it for the next turn)
    kind: str | None = None  # docs/kinds.md; None: the endpoint, else the target's endpoint
    payload: Any = None  # what the kind sends beyond the prompt (workload/kinds.py builds it)
    input_units: float | None = None  # inputs, images, audio seconds, documents: what the kind counts
    steps: tuple[RequestSpec, ...] = ()  # a flow's steps, sent one after the other
    previous_response_id: str | None = None  # responses: the server holds the history under this id
    session: int = -1  # the multi-turn session it belongs to (the record's session), -1 outside one
    tools: tuple[str, ...] = ()  # names of the synthetic tools offered (docs/agents.md)
    tool_results: tuple[ToolResult, ...] = ()  # the previous answer's tool calls and their results, sent after the history
    step: str = ""  # an agentic task's step (docs/agents.md)
