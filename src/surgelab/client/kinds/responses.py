"""responses: OpenAI's Responses API (``POST /v1/responses``), streamed as typed SSE events or whole.

The stream is ``response.created``, ``response.in_progress``, output items and content parts,
one ``response.output_text.delta`` per piece of text (``response.reasoning_text.delta`` for a
reasoning model's thinking: tokens too), and ``response.completed`` — or
``response.incomplete`` when ``max_output_tokens`` cut it — whose ``response.usage`` has
``input_tokens`` and ``output_tokens``. An ``error`` event or ``response.failed`` is the
server's failure: a protocol_error with its words.

A session's later turn sends ``previous_response_id`` instead of the history when the class
asks for server-side state (``session.previous_response_id``): the server keeps the
conversation, and the request carries only the new message.
"""

from __future__ import annotations

from typing import Any

from surgelab.client.kinds.text import Generation, conversation, error_words
from surgelab.client.kinds.tool_calls import ToolCalls, offered, responses_result_items
from surgelab.client.transport import ProtocolError
from surgelab.metrics.record import Outcome
from surgelab.workload.request import RequestSpec

__all__ = ["Responses"]

_TEXT_DELTAS = frozenset(("response.output_text.delta", "response.reasoning_text.delta"))
_ENDS = frozenset(("response.completed", "response.incomplete"))


class Responses(Generation):
    path = "/responses"
    stream_end = "response.completed"
    output_field = "output_tokens"
    prompt_fields = ("input_tokens",)

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        target = self.ctx.target
        body: dict[str, Any] = {"model": target.model, "max_output_tokens": spec.max_tokens}
        if spec.system_prompt:
            body["instructions"] = spec.system_prompt
        if spec.previous_response_id:
            body["previous_response_id"] = spec.previous_response_id
            body["input"] = responses_result_items(spec, False) if spec.tool_results else spec.prompt
        elif spec.tool_results:
            body["input"] = conversation(spec.history, spec.prompt) + responses_result_items(spec, True)
        else:
            body["input"] = conversation(spec.history, spec.prompt) if spec.history else spec.prompt
        if spec.tools:
            body["tools"] = offered(spec, "responses")
        if target.stream:
            body["stream"] = True
        if target.force_output_tokens:
            body["ignore_eos"] = True
        return body

    def stream_event(self, event: dict, out: Outcome, calls: ToolCalls) -> tuple[str | None, bool, dict | None]:
        kind = event.get("type")
        if kind in _TEXT_DELTAS:
            return event.get("delta"), False, None
        if kind == "response.output_item.added" and (event.get("item") or {}).get("type") == "function_call":
            calls.add_start(event.get("output_index"), event["item"], id_field="call_id")
        elif kind == "response.function_call_arguments.delta":
            calls.add(event.get("output_index"), arguments=event.get("delta"))
        if kind == "response.created":
            out.response_id = event["response"].get("id")
        if kind in _ENDS:
            response = event["response"]
            return None, True, response.get("usage")
        if kind == "error":
            raise ProtocolError(f"error in stream: {error_words(event)}")
        if kind == "response.failed":
            raise ProtocolError(f"response failed: {error_words(event['response'].get('error') or {})}")
        return None, False, None

    def whole(self, body: dict, status: int, out: Outcome, calls: ToolCalls) -> tuple[str, dict | None]:
        if body.get("error") or body.get("status") == "failed":
            raise ProtocolError(f"error body with status {status}: {error_words(body.get('error') or {})}")
        out.response_id = body.get("id")
        for index, item in enumerate(body.get("output") or ()):
            if isinstance(item, dict) and item.get("type") == "function_call":
                calls.add_start(index, item, id_field="call_id")
        text = body.get("output_text")  # the SDKs' convenience field, where a server adds it
        if not isinstance(text, str):
            parts = [
                part["text"]
                for item in body["output"]
                if item.get("type") == "message"
                for part in item.get("content") or ()
                if part.get("type") == "output_text"
            ]
            text = "".join(parts)
        return text, body.get("usage")
