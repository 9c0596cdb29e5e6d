"""chat and completions (and vision, which is chat with image parts): streamed with SSE or whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from surgelab.client.hints import HEAD_BYTES, not_a_stream
from surgelab.client.http1 import Response
from surgelab.client.kinds.base import KindContext, json_body
from surgelab.client.sse import SSEError, SSEParser
from surgelab.client.transport import HttpCall, ProtocolError, read_body
from surgelab.metrics.record import Outcome, State
from surgelab.workload.request import RequestSpec

__all__ = ["Chat", "Completions", "Vision", "account"]


class _Generation:
    name = "chat"
    path = "/chat/completions"
    chat = True

    def __init__(self, ctx: KindContext) -> None:
        self.ctx = ctx

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        target = self.ctx.target
        body: dict[str, Any] = {"model": target.model, "max_tokens": spec.max_tokens}
        if self.chat:
            messages = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
            for user, assistant in spec.history:
                messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
            messages.append({"role": "user", "content": self.user_content(spec)})
            body["messages"] = messages
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
        return HttpCall(self.ctx.url(self.path), json_body(self.ctx, self.body(spec), spec))

    async def read(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        if self.ctx.target.stream:
            await self._read_stream(resp, out, on_first)
        else:
            await self._read_whole(resp, out)

    async def _read_stream(self, resp: Response, out: Outcome, on_first: Callable[[], None]) -> None:
        limit = self.ctx.target.max_response_bytes
        clock, parser, pieces, tokens = (
            self.ctx.clock,
            SSEParser(max_line=min(limit, 8 * 1024 * 1024)),
            [],
            out.token_ns,
        )
        done = finished = False
        size = 0
        usage = None
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
                    event = orjson.loads(payload)
                    text, reason, event_usage = _stream_event(event)
                    if text:
                        if out.first_token_ns is None:
                            out.first_token_ns = now
                            on_first()
                        tokens.append(now)
                        pieces.append(text)
                        size += len(text)
                        if size > limit:
                            raise ProtocolError(f"streamed answer over max_response_bytes ({limit})")
                    finished = finished or reason is not None
                    usage = event_usage or usage
            for payload in parser.close():
                done = done or payload == b"[DONE]"
        except (orjson.JSONDecodeError, SSEError, TypeError, AttributeError, IndexError) as exc:
            raise ProtocolError(f"invalid stream event: {exc}") from None
        out.end_ns = clock()
        if not (done or finished):
            if pieces:
                raise ProtocolError("stream ended before [DONE] or a finish_reason")
            raise ProtocolError(not_a_stream(resp.headers.get("Content-Type", ""), head))
        account(self.ctx, out, usage, pieces)

    async def _read_whole(self, resp: Response, out: Outcome) -> None:
        raw = await read_body(resp, self.ctx.target.max_response_bytes)
        out.end_ns = out.first_token_ns = self.ctx.clock()
        try:
            body = orjson.loads(raw)
            if "error" in body and "choices" not in body:
                raise ProtocolError(f"error body with status {resp.status}: {str(body['error'])[:300]}")
            choice = body["choices"][0]
            text = choice["message"].get("content") or "" if self.chat else choice.get("text") or ""
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ProtocolError(f"invalid response body: {type(exc).__name__}: {exc}") from None
        account(self.ctx, out, body.get("usage"), [text])


class Chat(_Generation):
    pass


class Completions(_Generation):
    name = "completions"
    path = "/completions"
    chat = False


class Vision(_Generation):
    """Chat with the spec's images as ``image_url`` parts (base64 data URLs) after the text."""

    name = "vision"

    def user_content(self, spec: RequestSpec) -> Any:
        parts: list[dict[str, Any]] = [{"type": "text", "text": spec.prompt}]
        for url, _w, _h, detail in spec.payload or ():
            image: dict[str, Any] = {"url": url}
            if detail != "auto":
                image["detail"] = detail
            parts.append({"type": "image_url", "image_url": image})
        return parts


def account(ctx: KindContext, out: Outcome, usage: dict | None, pieces: list[str]) -> None:
    """Token counts: the server's usage when it reports it, else our own count."""
    try:
        out.text = "".join(pieces)
        if usage and usage.get("completion_tokens") is not None:
            out.output_tokens = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                out.prompt_tokens = int(usage["prompt_tokens"])
            out.usage_source = "server"
        else:
            out.output_tokens = ctx.tokenizer.count(out.text)
            out.usage_source = "counted"
    except (TypeError, ValueError, AttributeError) as exc:  # a malformed answer is not a success
        raise ProtocolError(f"invalid usage or content: {exc}") from None
    out.state = State.OK


def _stream_event(event: dict) -> tuple[str | None, str | None, dict | None]:
    """(content text, finish_reason, usage) of one streamed chunk, chat or completions."""
    if "error" in event and not event.get("choices"):
        raise ProtocolError(f"error in stream: {str(event['error'])[:300]}")
    choices = event.get("choices")
    text = reason = None
    if choices:
        choice = choices[0]
        delta = choice.get("delta")
        if delta is not None:
            text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
        else:
            text = choice.get("text")
        reason = choice.get("finish_reason")
    return text, reason, event.get("usage")
