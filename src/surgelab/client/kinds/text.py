"""chat and completions (and vision, which is chat with image parts): streamed with SSE or whole.

``Generation`` is what every token-generating kind shares — the SSE loop that times each text
delta, the whole-body read, the token accounting; a kind names its path and body and says what
one streamed event, a whole body and a usage block mean (``responses.py`` and ``messages.py``
are the other APIs' words for the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from surgelab.client.hints import HEAD_BYTES, not_a_stream
from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext, json_body
from surgelab.client.kinds.tool_calls import ToolCalls, chat_result_messages, finish, offered
from surgelab.client.sse import SSEError, SSEParser
from surgelab.client.transport import HttpCall, ProtocolError, read_body
from surgelab.metrics.record import Outcome, State
from surgelab.workload.request import RequestSpec

__all__ = ["Chat", "Completions", "Generation", "Vision", "account", "conversation", "error_words"]


class Generation:
    """A kind whose answer is text, streamed as SSE events or whole; OpenAI's chat by default."""

    path = "/chat/completions"
    chat = True
    auth = "bearer"  # how the API key is sent (client/transport.py)
    headers: dict[str, str] = {}
    output_field = "completion_tokens"  # the usage block's output count
    prompt_fields: tuple[str, ...] = ("prompt_tokens",)  # its prompt count, or the parts that add up to it (the first always there)

    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        target = self.ctx.target
        body: dict[str, Any] = {"model": target.model, "max_tokens": spec.max_tokens}
        if self.chat:
            system = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
            body["messages"] = system + conversation(spec.history, self.user_content(spec))
            if spec.tool_results:
                body["messages"] += chat_result_messages(spec)
            if spec.tools:
                body["tools"] = offered(spec, "chat")
        else:
            turns = [text for pair in spec.history for text in pair]
            body["prompt"] = " ".join(t.strip() for t in (spec.system_prompt, *turns, spec.prompt) if t.strip())
        if target.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if target.force_output_tokens:
            body["ignore_eos"] = True
            body["min_tokens"] = spec.max_tokens
        return body

    def user_content(self, spec: RequestSpec) -> Any:
        return spec.prompt

    def call(self, spec: RequestSpec) -> HttpCall:
        return HttpCall(
            self.ctx.url(self.path), json_body(self.ctx, self.body(spec), spec), headers=self.headers, auth=self.auth
        )

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        if self.ctx.target.stream:
            await self._read_stream(resp, out, on_first)
        else:
            await self._read_whole(resp, out)

    async def _read_stream(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        limit = self.ctx.target.max_response_bytes
        clock, parser, tokens = self.ctx.clock, SSEParser(max_line=min(limit, 8 * 1024 * 1024)), out.token_ns
        pieces: list[str] = []
        done = finished = False
        size = 0
        usage: dict = {}
        calls = ToolCalls()
        head = b""  # the body's first bytes, while it brings no event: what it was instead
        try:
            async for chunk in resp.content.iter_any():
                now = clock()
                if not (done or finished or pieces) and len(head) < HEAD_BYTES:
                    head += chunk[: HEAD_BYTES - len(head)]
                for payload in parser.feed(chunk):
                    if payload == b"[DONE]":
                        done = True
                        continue
                    events, fragments = calls.events, calls.fragments
                    text, ends, event_usage = self.stream_event(orjson.loads(payload), out, calls)
                    if calls.events > events and out.first_tool_ns is None:
                        out.first_tool_ns = now
                    if calls.fragments > fragments:  # tool-call arguments are generated tokens too
                        if out.first_token_ns is None:
                            out.first_token_ns = now
                            on_first()
                        tokens.append(now)
                    if text:
                        if out.first_token_ns is None:
                            out.first_token_ns = now
                            on_first()
                        tokens.append(now)
                        pieces.append(text)
                        size += len(text)
                        if size > limit:
                            raise ProtocolError(f"streamed answer over max_response_bytes ({limit})")
                    finished = finished or ends
                    if event_usage:
                        usage.update(event_usage)
            for payload in parser.close():
                done = done or payload == b"[DONE]"
        except (orjson.JSONDecodeError, SSEError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise ProtocolError(f"invalid stream event: {exc}") from None
        out.end_ns = clock()
        if not (done or finished):
            if pieces:
                raise ProtocolError(f"stream ended before {self.stream_end}")
            raise ProtocolError(not_a_stream(resp.headers.get("Content-Type", ""), head))
        finish(out, calls)
        try:
            counts = self.counts(usage)
        except (TypeError, ValueError, AttributeError) as exc:  # a malformed answer is not a success
            raise ProtocolError(f"invalid usage: {exc}") from None
        account(self.ctx, out, counts, pieces)

    async def _read_whole(self, resp: Response, out: Outcome) -> None:
        raw = await read_body(resp, self.ctx.target.max_response_bytes)
        out.end_ns = out.first_token_ns = self.ctx.clock()
        calls = ToolCalls()
        try:
            body = orjson.loads(raw)
            text, usage = self.whole(body, resp.status, out, calls)
            counts = self.counts(usage)
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise ProtocolError(f"invalid response body: {type(exc).__name__}: {exc}") from None
        if calls.calls:
            out.first_tool_ns = out.end_ns
        finish(out, calls)
        account(self.ctx, out, counts, [text])

    stream_end = "[DONE] or a finish_reason"
    """What ends this kind's stream, as the error for a stream cut short says."""

    def stream_event(self, event: dict, out: Outcome, calls: ToolCalls) -> tuple[str | None, bool, dict | None]:
        """(content text, whether the answer is finished, usage) of one streamed chunk, chat or completions;
        what else it says of the answer (its id) goes into ``out``, its tool-call fragments into ``calls``."""
        if "error" in event and not event.get("choices"):
            raise ProtocolError(f"error in stream: {str(event['error'])[:300]}")
        choices = event.get("choices")
        text = reason = None
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta is not None:
                text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                if delta.get("tool_calls") is not None:
                    calls.add_chat(delta["tool_calls"])
            else:
                text = choice.get("text")
            reason = choice.get("finish_reason")
        return text, reason is not None, event.get("usage")

    def whole(self, body: dict, status: int, out: Outcome, calls: ToolCalls) -> tuple[str, dict | None]:
        """(text, usage) of a whole answer, its tool calls into ``calls``; a ProtocolError for an error body."""
        if "error" in body and "choices" not in body:
            raise ProtocolError(f"error body with status {status}: {str(body['error'])[:300]}")
        choice = body["choices"][0]
        text = choice["message"].get("content") or "" if self.chat else choice.get("text") or ""
        if self.chat and choice["message"].get("tool_calls"):
            calls.add_chat(choice["message"]["tool_calls"])
        return text, body.get("usage")

    @classmethod
    def counts(cls, usage: dict | None) -> tuple[int, int | None] | None:
        """(output tokens, prompt tokens) from a usage block; None when it has no output count."""
        if not usage or usage.get(cls.output_field) is None:
            return None
        parts = [usage.get(name) for name in cls.prompt_fields]
        prompt = None if parts[0] is None else sum(int(p) for p in parts if p is not None)
        return int(usage[cls.output_field]), prompt


class Chat(Generation):
    pass


class Completions(Generation):
    path = "/completions"
    chat = False


class Vision(Generation):
    """Chat with the spec's images as ``image_url`` parts (base64 data URLs) after the text."""

    def user_content(self, spec: RequestSpec) -> Any:
        parts: list[dict[str, Any]] = [{"type": "text", "text": spec.prompt}]
        for url, _w, _h, detail in spec.payload or ():
            image: dict[str, Any] = {"url": url}
            if detail != "auto":
                image["detail"] = detail
            parts.append({"type": "image_url", "image_url": image})
        return parts


def conversation(history: tuple[tuple[str, str], ...], user: Any) -> list[dict[str, Any]]:
    """A session's earlier turns as user and assistant messages, then the new user message."""
    messages = []
    for asked, answered in history:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    messages.append({"role": "user", "content": user})
    return messages


def error_words(error: Any) -> str:
    """``code: message`` of an error object (OpenAI's ``code``, Anthropic's ``type``), or what there is."""
    if isinstance(error, dict) and error.get("message"):
        code = error.get("code") or error.get("type")
        return (f"{code}: " if code else "") + str(error["message"])[:300]
    return str(error)[:300]


def account(ctx: KindContext, out: Outcome, counts: tuple[int, int | None] | None, pieces: list[str]) -> None:
    """Token counts: the server's usage when it reports it, else our own count."""
    out.text = "".join(pieces)
    if counts is not None:
        out.output_tokens = counts[0]
        if counts[1] is not None:
            out.prompt_tokens = counts[1]
        out.usage_source = "server"
    else:
        out.output_tokens = ctx.tokenizer.count(out.text)
        out.usage_source = "counted"
    out.state = State.OK
