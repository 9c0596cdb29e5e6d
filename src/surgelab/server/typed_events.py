"""Answers of OpenAI's Responses API and Anthropic's Messages API: whole bodies and typed SSE events.

Both APIs stream named events (``event: NAME`` then ``data:`` with a ``type`` field) instead of
chat chunks: an opening that names the answer, one delta event per token, and a closing that
carries the usage. As in ``responses.py``, each request renders its delta event once around a
placeholder and splices every token into it (tokens are vocabulary words: no JSON escaping).
Same interface as ``Completion``: ``opening``, ``tokens``, ``last_token``, ``closing``, ``whole``.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

__all__ = ["ResponsesAnswer", "MessagesAnswer", "STOP_REASONS"]

_HOLE = "\x1f\x1e"
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}  # finish_reason -> Anthropic's stop_reason


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _split(name: str, data: dict[str, Any]) -> tuple[bytes, bytes]:
    before, after = _event(name, data).split(orjson.dumps(_HOLE)[1:-1])
    return before, after


class ResponsesAnswer:
    """One Responses API answer (``resp_…``): ``response.created`` … ``response.output_text.delta`` … ``response.completed``."""

    def __init__(self, request_id: str, model: str, max_output_tokens: int | None) -> None:
        self.id = "resp_" + request_id
        self._message_id = "msg_" + request_id
        self.model = model
        self.created = int(time.time())
        self.max_output_tokens = max_output_tokens
        self._sequence = 0
        delta: dict[str, Any] = {"type": "response.output_text.delta", "item_id": self._message_id, "output_index": 0,
                 "content_index": 0, "delta": _HOLE, "logprobs": [], "sequence_number": 0}  # fmt: skip
        before, after = _split(delta["type"], delta)
        self._before, (self._middle, self._after) = before, after.split(b"0}", 1)

    def _next(self, name: str, data: dict[str, Any]) -> bytes:
        data["sequence_number"] = self._sequence
        self._sequence += 1
        return _event(name, {"type": name, **data})

    def _response(self, status: str, output: list[dict[str, Any]], usage: dict[str, int] | None) -> dict[str, Any]:
        return {
            "id": self.id, "object": "response", "created_at": self.created, "status": status, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "model": self.model, "output": output, "max_output_tokens": self.max_output_tokens, "usage": usage,
        }  # fmt: skip

    def _message(self, text: str, status: str) -> dict[str, Any]:
        part = {"type": "output_text", "text": text, "annotations": []}
        return {"id": self._message_id, "type": "message", "status": status, "role": "assistant", "content": [part]}

    def opening(self) -> bytes:
        created = self._response("in_progress", [], None)
        item = {**self._message("", "in_progress"), "content": []}
        return (
            self._next("response.created", {"response": created})
            + self._next("response.in_progress", {"response": created})
            + self._next("response.output_item.added", {"output_index": 0, "item": item})
            + self._next("response.content_part.added", {"item_id": self._message_id, "output_index": 0,
                         "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
        )  # fmt: skip

    def tokens(self, words: list[str], first: bool) -> bytes:
        out = []
        for word in words:
            out.append(self._before + word.encode() + self._middle + b"%d}" % self._sequence + self._after)
            self._sequence += 1
        return b"".join(out)

    def last_token(self, word: str, first: bool, finish_reason: str) -> bytes:
        return self.tokens([word], first)

    def closing(self, text: str, finish_reason: str, usage: dict[str, int], include_usage: bool) -> bytes:
        status = "incomplete" if finish_reason == "length" else "completed"
        message = self._message(text, "completed")
        part = message["content"][0]
        where = {"item_id": self._message_id, "output_index": 0, "content_index": 0}
        done = self._response(status, [message], _usage(usage))
        return (
            self._next("response.output_text.done", {**where, "text": text, "logprobs": []})
            + self._next("response.content_part.done", {**where, "part": part})
            + self._next("response.output_item.done", {"output_index": 0, "item": message})
            + self._next(f"response.{status}", {"response": done})
        )

    def whole(self, text: str, finish_reason: str, usage: dict[str, int]) -> bytes:
        status = "incomplete" if finish_reason == "length" else "completed"
        return orjson.dumps(self._response(status, [self._message(text, "completed")], _usage(usage)))


def _usage(usage: dict[str, int]) -> dict[str, Any]:
    return {
        "input_tokens": usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["total_tokens"],
    }  # fmt: skip


class MessagesAnswer:
    """One Messages API answer (``msg_…``): ``message_start``, a text block of ``text_delta`` events, ``message_delta``, ``message_stop``."""

    def __init__(self, request_id: str, model: str, prompt_tokens: int) -> None:
        self.id = "msg_" + request_id
        self.model = model
        self.prompt_tokens = prompt_tokens
        delta: dict[str, Any] = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": _HOLE},
        }
        self._before, self._after = _split(delta["type"], delta)

    def _message(self, content: list[dict[str, Any]], stop: str | None, output_tokens: int) -> dict[str, Any]:
        return {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": output_tokens},
        }  # fmt: skip

    def opening(self) -> bytes:
        return (
            _event("message_start", {"type": "message_start", "message": self._message([], None, 1)})
            + _event("content_block_start", {"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}})
            + _event("ping", {"type": "ping"})
        )  # fmt: skip

    def tokens(self, words: list[str], first: bool) -> bytes:
        before, after = self._before, self._after
        return b"".join(before + w.encode() + after for w in words)

    def last_token(self, word: str, first: bool, finish_reason: str) -> bytes:
        return self.tokens([word], first)

    def closing(self, text: str, finish_reason: str, usage: dict[str, int], include_usage: bool) -> bytes:
        delta = {"stop_reason": STOP_REASONS.get(finish_reason, "end_turn"), "stop_sequence": None}
        return (
            _event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + _event("message_delta", {"type": "message_delta", "delta": delta,
                     "usage": {"output_tokens": usage["completion_tokens"]}})
            + _event("message_stop", {"type": "message_stop"})
        )  # fmt: skip

    def whole(self, text: str, finish_reason: str, usage: dict[str, int]) -> bytes:
        stop = STOP_REASONS.get(finish_reason, "end_turn")
        return orjson.dumps(self._message([{"type": "text", "text": text}], stop, usage["completion_tokens"]))
