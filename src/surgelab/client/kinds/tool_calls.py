"""Tool calls: the synthetic tools a request offers, the calls its answer makes, and their results sent back.

Each API says it in its own words. OpenAI's chat streams ``delta.tool_calls`` fragments (an
``index``, then ``id`` and ``function.name`` once, ``function.arguments`` in pieces); the
Responses API streams ``response.output_item.added`` (a ``function_call`` item) and
``response.function_call_arguments.delta``; Anthropic's Messages API a ``content_block_start``
of type ``tool_use`` and ``input_json_delta`` pieces. ``ToolCalls`` gathers the fragments in
any of them; one that is not what the API says (no index, a name that is not a string, arguments
that are not JSON at the end) is a ProtocolError, so the request ends as one protocol_error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from surgelab.client.transport import ProtocolError
from surgelab.metrics.record import Outcome
from surgelab.workload.request import RequestSpec

__all__ = ["ToolCall", "ToolCalls", "offered", "finish", "chat_result_messages", "responses_result_items",
           "messages_result_messages"]  # fmt: skip

_PARAMETERS = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


@dataclass(slots=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str


class ToolCalls:
    """The tool calls of one answer, gathered from streamed fragments (or whole), by their index."""

    def __init__(self) -> None:
        self.calls: dict[int, ToolCall] = {}
        self.events = 0  # fragments of any sort (the first is the time to first tool-call delta)
        self.fragments = 0  # fragments with argument text: generated tokens

    def add(self, index: Any, call_id: Any = None, name: Any = None, arguments: Any = "") -> None:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ProtocolError(f"invalid tool call delta: index {index!r} is not a whole number")
        for what, value in (("id", call_id), ("name", name), ("arguments", arguments)):
            if value is not None and not isinstance(value, str):
                raise ProtocolError(f"invalid tool call delta: its {what} is {type(value).__name__}, not a string")
        call = self.calls.get(index)
        if call is None:
            if not name:
                raise ProtocolError(f"invalid tool call delta: call {index} starts without a function name")
            call = self.calls[index] = ToolCall(call_id or f"call_{index}", name, "")
        call.arguments += arguments or ""
        self.events += 1
        self.fragments += bool(arguments)

    def add_start(self, index: Any, block: Any, name_field: str = "name", id_field: str = "id") -> None:
        """A call's opening item or block (Responses API ``function_call``, Anthropic ``tool_use``)."""
        if not isinstance(block, dict):
            raise ProtocolError("invalid tool call delta: its item is not an object")
        self.add(index, block.get(id_field), block.get(name_field), block.get("arguments") or "")

    def add_chat(self, fragments: Any) -> None:
        """OpenAI's ``delta.tool_calls`` (or a whole message's ``tool_calls``)."""
        if not isinstance(fragments, list):
            raise ProtocolError(f"invalid tool call delta: tool_calls is {type(fragments).__name__}, not a list")
        for position, fragment in enumerate(fragments):
            if not isinstance(fragment, dict):
                raise ProtocolError("invalid tool call delta: a tool call is not an object")
            function = fragment.get("function") or {}
            if not isinstance(function, dict):
                raise ProtocolError("invalid tool call delta: its function is not an object")
            self.add(
                fragment.get("index", position), fragment.get("id"), function.get("name"), function.get("arguments")
            )


def finish(out: Outcome, calls: ToolCalls) -> None:
    """Fill the outcome's tool-call fields; a call whose arguments are not a JSON object is a ProtocolError."""
    if not calls.calls:
        return
    ordered = [calls.calls[k] for k in sorted(calls.calls)]
    for k, call in enumerate(ordered):
        try:
            parsed = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            raise ProtocolError(
                f"tool call {k} ({call.name}): its arguments are not JSON: {call.arguments[:80]!r}"
            ) from None
        if not isinstance(parsed, dict):
            raise ProtocolError(f"tool call {k} ({call.name}): its arguments are not a JSON object")
    out.calls = ordered
    out.tool_calls = len(ordered)
    out.tool_names = ",".join(call.name for call in ordered)
    out.tool_args_bytes = sum(len(call.arguments.encode()) for call in ordered)


def offered(spec: RequestSpec, api: str) -> list[dict[str, Any]]:
    """The spec's synthetic tools as ``api`` (chat, responses, messages) declares them."""
    about = "A synthetic tool of surgelab's: give it a query."
    if api == "chat":
        return [
            {"type": "function", "function": {"name": n, "description": about, "parameters": _PARAMETERS}}
            for n in spec.tools
        ]
    if api == "responses":
        return [{"type": "function", "name": n, "description": about, "parameters": _PARAMETERS} for n in spec.tools]
    return [{"name": n, "description": about, "input_schema": _PARAMETERS} for n in spec.tools]


def chat_result_messages(spec: RequestSpec) -> list[dict[str, Any]]:
    """The answer's tool calls and a ``tool`` message with each result (OpenAI chat)."""
    calls = [
        {"id": r.call_id, "type": "function", "function": {"name": r.name, "arguments": r.arguments}}
        for r in spec.tool_results
    ]
    return [{"role": "assistant", "content": None, "tool_calls": calls}] + [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.output} for r in spec.tool_results
    ]


def responses_result_items(spec: RequestSpec, with_calls: bool) -> list[dict[str, Any]]:
    """``function_call_output`` items (after the ``function_call`` items, unless the server holds them)."""
    calls = [{"type": "function_call", "call_id": r.call_id, "name": r.name, "arguments": r.arguments}
             for r in spec.tool_results] if with_calls else []  # fmt: skip
    return calls + [
        {"type": "function_call_output", "call_id": r.call_id, "output": r.output} for r in spec.tool_results
    ]


def messages_result_messages(spec: RequestSpec) -> list[dict[str, Any]]:
    """An assistant message of ``tool_use`` blocks, then a user message of ``tool_result`` blocks (Anthropic)."""
    uses = [{"type": "tool_use", "id": r.call_id, "name": r.name, "input": orjson.loads(r.arguments or "{}")}
            for r in spec.tool_results]  # fmt: skip
    results = [{"type": "tool_result", "tool_use_id": r.call_id, "content": r.output} for r in spec.tool_results]
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
