"""OpenAI response bodies and SSE chunks, shaped like OpenAI's and vLLM's.

Streaming is the hot path (one SSE event per token), so each request pre-renders its chunk
JSON once around a placeholder and splices every token into it; tokens are vocabulary
words (ASCII letters after a space) and need no JSON escaping.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

__all__ = ["DONE", "Completion", "usage"]

DONE = b"data: [DONE]\n\n"
_HOLE = "\x1f\x1e"


class Completion:
    """Renders one chat or text completion, streamed or whole."""

    def __init__(self, request_id: str, model: str, chat: bool) -> None:
        self.id = ("chatcmpl-" if chat else "cmpl-") + request_id
        self.model = model
        self.chat = chat
        self.created = int(time.time())
        self._plain = self._template(first=False)
        self._first = self._template(first=True) if chat else self._plain

    def tokens(self, words: list[str], first: bool) -> bytes:
        """SSE events for ``words`` (each ``" " + word``), one event per token."""
        if not words:
            return b""
        head = self._first[0] + words[0].encode() + self._first[1] if first else b""
        rest = words[1:] if first else words
        before, after = self._plain
        return head + b"".join(before + w.encode() + after for w in rest)

    def last_token(self, word: str, first: bool, finish_reason: str) -> bytes:
        """The final token's event, carrying ``finish_reason`` (as vLLM does)."""
        return self._event(self._choice(word, first, finish_reason))

    def opening(self) -> bytes:
        """What a stream starts with before its first token: nothing, for chat and completions."""
        return b""

    def closing(self, text: str, finish_reason: str, usage: dict[str, int], include_usage: bool) -> bytes:
        """What ends a stream after its last token: the usage chunk, if asked for, and ``[DONE]``."""
        return (self.usage_chunk(usage) if include_usage else b"") + DONE

    def usage_chunk(self, usage: dict[str, int]) -> bytes:
        """The ``stream_options.include_usage`` chunk: no choices, just usage."""
        return self._event([], usage=usage)

    def whole(self, text: str, finish_reason: str, usage: dict[str, int]) -> bytes:
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        body = {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage,
        }
        return orjson.dumps(body)

    def _choice(self, text: str, first: bool, finish_reason: str | None) -> list[dict[str, Any]]:
        if self.chat:
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        return [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]

    def _event(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _template(self, first: bool) -> tuple[bytes, bytes]:
        before, after = self._event(self._choice(_HOLE, first, None)).split(orjson.dumps(_HOLE)[1:-1])
        return before, after


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
