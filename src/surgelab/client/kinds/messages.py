"""messages: Anthropic's Messages API (``POST /v1/messages``), streamed as typed SSE events or whole.

The stream is ``message_start`` (its ``message.usage.input_tokens``), then per content block
``content_block_start``, ``content_block_delta`` events (``text_delta``, or ``thinking_delta``
for extended thinking: tokens too) and ``content_block_stop``, then ``message_delta`` (the
``stop_reason`` and ``usage.output_tokens``, counted so far) and ``message_stop``; ``ping``
events may come at any time. An ``error`` event (``{"type": "error", "error": {"type",
"message"}}``, e.g. ``overloaded_error``) is the server's failure: a protocol_error with its words.

Prompt tokens are ``input_tokens`` plus the cache's ``cache_read_input_tokens`` and
``cache_creation_input_tokens``: Anthropic counts those apart, and together they are the prompt.
The key goes in ``x-api-key`` with ``anthropic-version``, not as a Bearer token.
"""

from __future__ import annotations

from typing import Any

import orjson

from surgelab.client.kinds.text import Generation, conversation, error_words
from surgelab.client.kinds.tool_calls import ToolCalls, messages_result_messages, offered
from surgelab.client.transport import ProtocolError
from surgelab.metrics.record import Outcome
from surgelab.workload.request import RequestSpec

__all__ = ["Messages", "ANTHROPIC_VERSION"]

ANTHROPIC_VERSION = "2023-06-01"
_DELTA_TEXT = {"text_delta": "text", "thinking_delta": "thinking"}
_PROMPT_PARTS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class Messages(Generation):
    path = "/messages"
    stream_end = "message_stop"
    auth = "x-api-key"
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    output_field = "output_tokens"
    prompt_fields = _PROMPT_PARTS  # Anthropic's input_tokens leaves out the prompt's cached parts

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        target = self.ctx.target
        body: dict[str, Any] = {"model": target.model, "max_tokens": spec.max_tokens}
        if spec.system_prompt:
            body["system"] = spec.system_prompt
        body["messages"] = conversation(spec.history, spec.prompt)
        if spec.tool_results:
            body["messages"] += messages_result_messages(spec)
        if spec.tools:
            body["tools"] = offered(spec, "messages")
        if target.stream:
            body["stream"] = True
        if target.force_output_tokens:
            body["ignore_eos"] = True
            body["min_tokens"] = spec.max_tokens
        return body

    def stream_event(self, event: dict, out: Outcome, calls: ToolCalls) -> tuple[str | None, bool, dict | None]:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event["delta"]
            if delta.get("type") == "input_json_delta":
                calls.add(event.get("index"), arguments=delta.get("partial_json"))
                return None, False, None
            field = _DELTA_TEXT.get(delta.get("type"))
            return (delta.get(field) if field else None), False, None
        if kind == "content_block_start" and (event.get("content_block") or {}).get("type") == "tool_use":
            calls.add_start(event.get("index"), {**event["content_block"], "arguments": ""})
        if kind == "message_start":
            message = event["message"]
            out.response_id = message.get("id")
            usage = message.get("usage") or {}  # its output count is the start's, not the answer's
            return None, False, {k: v for k, v in usage.items() if k != "output_tokens"}
        if kind == "message_delta":
            return None, False, event.get("usage")
        if kind == "message_stop":
            return None, True, None
        if kind == "error":
            raise ProtocolError(f"error in stream: {error_words(event.get('error'))}")
        return None, False, None

    def whole(self, body: dict, status: int, out: Outcome, calls: ToolCalls) -> tuple[str, dict | None]:
        if body.get("type") == "error" or "error" in body:
            raise ProtocolError(f"error body with status {status}: {error_words(body.get('error'))}")
        out.response_id = body.get("id")
        for index, block in enumerate(body["content"]):
            if block.get("type") == "tool_use":
                calls.add_start(index, {**block, "arguments": orjson.dumps(block.get("input") or {}).decode()})
        text = "".join(block["text"] for block in body["content"] if block.get("type") == "text")
        return text, body.get("usage")
