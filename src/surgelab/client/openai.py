"""OpenAI-compatible chat and text completions over aiohttp, streamed or not.

One ``send`` per request fills an ``Outcome`` with timestamps from the run clock: send,
first byte (response headers), first content token, every content chunk, end. It never
raises for a failed request; the failure becomes the outcome's state. Only cancellation
(the run stopping) propagates.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from surgelab._compat import timeout_at
from surgelab.client.sse import SSEError, SSEParser
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.workload.request import RequestSpec
from surgelab.workload.tokenizer import Tokenizer

__all__ = ["OpenAIClient"]

_SECRET_HEADER = re.compile(r"auth|api[-_]?key|token|cookie|secret", re.I)
_CONNECTION_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError)


class _Protocol(Exception):
    """The server answered, but not with a valid OpenAI response."""


class OpenAIClient:
    """Sends completions to one target; use as an async context manager."""

    def __init__(
        self,
        target: Target,
        clock: Callable[[], int],
        tokenizer: Tokenizer,
        api_key: str | None = None,
        pool_size: int = 0,
    ) -> None:
        self.target = target
        self._clock = clock
        self._tokenizer = tokenizer
        self._urls = {
            "chat": target.base_url + "/chat/completions",
            "completions": target.base_url + "/completions",
            "embeddings": target.base_url + "/embeddings",
        }
        self._headers = {"Content-Type": "application/json", **target.headers}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        secrets = {api_key or ""}
        for name, value in self._headers.items():
            if _SECRET_HEADER.search(name):
                secrets.update((value, value.split()[-1] if value.split() else ""))
        self._secrets = sorted((s for s in secrets if len(s) >= 8), key=len, reverse=True)
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> OpenAIClient:
        connector = aiohttp.TCPConnector(
            limit=self._pool_size,
            force_close=self.target.connection == "close",
            enable_cleanup_closed=True,
        )
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.target.timeouts.connect)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=self._headers, auto_decompress=True
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        """The JSON body for ``spec``; public so previews and tests can show it."""
        endpoint = spec.endpoint or self.target.endpoint
        if endpoint == "embeddings":
            body: dict[str, Any] = {"model": self.target.model, "input": spec.prompt}
            body.update(self.target.extra_body)
            body.update(spec.extra)
            return body
        body = {"model": self.target.model, "max_tokens": spec.max_tokens}
        if endpoint == "chat":
            messages = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
            for user, assistant in spec.history:
                messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
            messages.append({"role": "user", "content": spec.prompt})
            body["messages"] = messages
        else:
            turns = [text for pair in spec.history for text in pair]
            body["prompt"] = " ".join(t.strip() for t in (spec.system_prompt, *turns, spec.prompt) if t.strip())
        if self.target.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.target.force_output_tokens:
            body["ignore_eos"] = True
            body["min_tokens"] = spec.max_tokens
        body.update(self.target.extra_body)
        body.update(spec.extra)
        return body

    async def send(self, spec: RequestSpec, out: Outcome) -> None:
        assert self._session is not None, "use OpenAIClient as an async context manager"
        timeouts = self.target.timeouts
        clock = self._clock
        loop = asyncio.get_running_loop()
        data = orjson.dumps(self.body(spec))
        endpoint = spec.endpoint or self.target.endpoint
        out.prompt_tokens = spec.prompt_tokens
        out.sent_ns = clock()
        started = loop.time()
        stage = "first token"
        try:
            async with timeout_at(started + min(timeouts.first_token, timeouts.total)) as deadline:  # noqa: SIM117
                async with self._session.post(self._urls[endpoint], data=data) as resp:
                    out.first_byte_ns = clock()
                    out.http_status = resp.status
                    if resp.status >= 400:
                        text = self._scrub((await resp.content.read(2048)).decode("utf-8", "replace"))
                        out.fail(State.HTTP_ERROR, f"HTTP {resp.status}: {text.strip()}", clock())
                        return
                    if endpoint == "embeddings":
                        await self._read_embeddings(resp, out)
                    elif self.target.stream:
                        await self._read_stream(resp, out, lambda: deadline.reschedule(started + timeouts.total))
                    else:
                        await self._read_whole(resp, out, endpoint == "chat")
                    if not spec.keep_text:
                        out.text = None
                    stage = "total"
        except aiohttp.ServerTimeoutError as exc:  # aiohttp's own (connect) timeout
            out.fail(State.TIMEOUT, f"connect timeout after {timeouts.connect:g}s: {exc}", clock())
        except asyncio.TimeoutError:  # noqa: UP041 - on 3.10 async_timeout raises this, not the builtin
            if out.first_token_ns is not None:
                stage = "total"
            limit = timeouts.total if stage == "total" else min(timeouts.first_token, timeouts.total)
            out.fail(State.TIMEOUT, f"{stage} timeout after {limit:g}s", clock())
        except _Protocol as exc:
            out.fail(State.PROTOCOL_ERROR, str(exc), clock())
        except aiohttp.ClientResponseError as exc:  # the bytes back were not valid HTTP
            out.fail(State.PROTOCOL_ERROR, f"invalid HTTP response: {exc.message}", clock())
        except _CONNECTION_ERRORS as exc:
            out.fail(State.CONNECTION_ERROR, f"{type(exc).__name__}: {exc}", clock())
        finally:
            if out.error:
                out.error = self._scrub(out.error)

    def _scrub(self, text: str) -> str:
        """Servers and gateways may echo the key in an error; records must never hold it."""
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return text

    async def _read_stream(self, resp: aiohttp.ClientResponse, out: Outcome, on_first: Callable[[], None]) -> None:
        clock, parser, pieces, tokens = self._clock, SSEParser(), [], out.token_ns
        done = finished = False
        usage = None
        try:
            async for chunk in resp.content.iter_any():
                now = clock()
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
                    finished = finished or reason is not None
                    usage = event_usage or usage
            for payload in parser.close():
                done = done or payload == b"[DONE]"
        except (orjson.JSONDecodeError, SSEError, TypeError, AttributeError, IndexError) as exc:
            raise _Protocol(f"invalid stream event: {exc}") from None
        out.end_ns = clock()
        if not (done or finished):
            raise _Protocol("stream ended before [DONE] or a finish_reason")
        self._account(out, usage, pieces)

    async def _read_whole(self, resp: aiohttp.ClientResponse, out: Outcome, chat: bool) -> None:
        raw = await resp.read()
        out.end_ns = out.first_token_ns = self._clock()
        try:
            body = orjson.loads(raw)
            if "error" in body and "choices" not in body:
                raise _Protocol(f"error body with status {resp.status}: {str(body['error'])[:300]}")
            choice = body["choices"][0]
            text = choice["message"].get("content") or "" if chat else choice.get("text") or ""
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise _Protocol(f"invalid response body: {type(exc).__name__}: {exc}") from None
        self._account(out, body.get("usage"), [text])

    async def _read_embeddings(self, resp: aiohttp.ClientResponse, out: Outcome) -> None:
        """Embeddings arrive whole: no first token, no output tokens; E2E is the latency."""
        raw = await resp.read()
        out.end_ns = self._clock()
        try:
            body = orjson.loads(raw)
            vectors = body["data"]
            if not isinstance(vectors, list) or not vectors:
                raise _Protocol("embeddings response without vectors")
            usage = body.get("usage") or {}
            if usage.get("prompt_tokens") is not None:
                out.prompt_tokens, out.usage_source = int(usage["prompt_tokens"]), "server"
            else:
                out.usage_source = "counted"
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise _Protocol(f"invalid embeddings body: {type(exc).__name__}: {exc}") from None
        out.output_tokens = 0
        out.state = State.OK

    def _account(self, out: Outcome, usage: dict | None, pieces: list[str]) -> None:
        """Token counts: the server's usage when it reports it, else our own count."""
        try:
            out.text = "".join(pieces)
            if usage and usage.get("completion_tokens") is not None:
                out.output_tokens = int(usage["completion_tokens"])
                if usage.get("prompt_tokens") is not None:
                    out.prompt_tokens = int(usage["prompt_tokens"])
                out.usage_source = "server"
            else:
                out.output_tokens = self._tokenizer.count(out.text)
                out.usage_source = "counted"
        except (TypeError, ValueError, AttributeError) as exc:  # a malformed answer is not a success
            raise _Protocol(f"invalid usage or content: {exc}") from None
        out.state = State.OK


def _stream_event(event: dict) -> tuple[str | None, str | None, dict | None]:
    """(content text, finish_reason, usage) of one streamed chunk, chat or completions."""
    if "error" in event and not event.get("choices"):
        raise _Protocol(f"error in stream: {str(event['error'])[:300]}")
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
