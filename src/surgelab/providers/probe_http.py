"""The probes' own small HTTP client: one chat request, everything about its answer kept.

The load client is built for speed and counts; a probe needs the opposite — the raw SSE
events, the status and error body, whether ``[DONE]`` came and what followed it — so that a
conformance check can say exactly what was wrong. Plain aiohttp, bounded by a timeout; its
TLS (a private CA, mutual TLS, another name) and proxy are the load path's
(``client/network.py``: ``request_options``), and a TLS failure says what to do about it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from surgelab.client.network import TLS_CLOSED, request_options, tls_failure
from surgelab.scenario.target import Tls

__all__ = ["Endpoint", "Reply", "ProbeClient"]

MAX_BODY = 8 * 1024 * 1024  # a probe answer larger than this is not read further


@dataclass(frozen=True)
class Endpoint:
    url: str  # OpenAI base URL, e.g. http://127.0.0.1:8000/v1
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    tls: Tls = Tls()  # trust, client certificate and TLS name for https:// (target.tls)
    proxy: str = "env"  # target.proxy: env (HTTPS_PROXY …), none, or a proxy URL


@dataclass
class Reply:
    """One HTTP exchange. ``status`` 0 means no HTTP answer (``error`` says why)."""

    status: int = 0
    elapsed: float = 0.0
    content_type: str = ""
    body: Any = None  # parsed JSON of a non-streamed answer (or an error body)
    raw: str = ""
    events: list[str] = field(default_factory=list)  # SSE data payloads, in order
    error: str | None = None
    retried: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def chunks(self) -> list[dict[str, Any]]:
        out = []
        for data in self.events:
            if data != "[DONE]":
                try:
                    out.append(json.loads(data))
                except ValueError:
                    out.append({"_unparsable": data})
        return out

    @property
    def text(self) -> str:
        """The answer's content, streamed or not."""
        if self.events:
            return "".join(
                str((c.get("delta") or {}).get("content") or "") for ch in self.chunks for c in ch.get("choices") or []
            )
        if isinstance(self.body, dict):
            choices = self.body.get("choices") or [{}]
            return str((choices[0].get("message") or {}).get("content") or choices[0].get("text") or "")
        return ""

    @property
    def usage(self) -> dict[str, Any] | None:
        if self.events:
            found = [ch["usage"] for ch in self.chunks if isinstance(ch.get("usage"), dict)]
            return found[-1] if found else None
        return self.body.get("usage") if isinstance(self.body, dict) else None

    @property
    def finish_reason(self) -> str | None:
        reasons = [
            c.get("finish_reason") for ch in self.chunks for c in ch.get("choices") or [] if c.get("finish_reason")
        ]
        if reasons:
            return reasons[-1]
        if isinstance(self.body, dict) and self.body.get("choices"):
            return self.body["choices"][0].get("finish_reason")
        return None

    def describe(self) -> str:
        if self.status == 0:
            return f"no answer ({self.error})"
        message = ""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            message = f": {self.body['error'].get('message', '')}"[:160]
        return f"HTTP {self.status} in {self.elapsed:.2f}s{message}"


class ProbeClient:
    """``async with ProbeClient(endpoint) as c: await c.chat(...)``."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._session: aiohttp.ClientSession | None = None
        self._answered = False  # any HTTP answer yet: a TLS connection closed before the first one is mutual TLS

    async def __aenter__(self) -> ProbeClient:
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"} if self.endpoint.api_key else {}
        self._session = aiohttp.ClientSession(headers=headers)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def chat(self, messages: list[dict[str, Any]], *, stream: bool = False, timeout: float | None = None,
                   **fields: Any) -> Reply:  # fmt: skip
        body = {"model": self.endpoint.model, "messages": messages, "stream": stream, **fields}
        return await self.request("POST", "/chat/completions", body, timeout=timeout)

    async def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> Reply:
        """Send one request; never raises for HTTP or network trouble (it is in the reply).

        A 5xx or a broken connection is tried once more (``retried``): a provider's transient
        failure is the error rate's business, not a verdict on conformance or context length.
        Timeouts are not retried — they are an answer of their own.
        """
        reply = await self._once(method, path, body, timeout)
        if reply.status >= 500 or (reply.status == 0 and "Timeout" not in (reply.error or "")):
            reply = await self._once(method, path, body, timeout)
            reply.retried = True
        return reply

    async def _once(self, method: str, path: str, body: Any, timeout: float | None) -> Reply:
        assert self._session is not None, "use ProbeClient as an async context manager"
        reply = Reply()
        started = time.perf_counter()
        limit = aiohttp.ClientTimeout(total=timeout or self.endpoint.timeout)
        url = self.endpoint.url.rstrip("/") + path
        options = request_options(url, self.endpoint.tls, self.endpoint.proxy)
        try:
            async with self._session.request(method, url, json=body, timeout=limit, **options) as response:
                self._answered = True
                reply.status = response.status
                reply.content_type = response.headers.get("Content-Type", "")
                raw = bytearray()
                while len(raw) < MAX_BODY and (piece := await response.content.read(65536)):
                    raw += piece
                reply.raw = raw.decode("utf-8", errors="replace")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            reply.error = tls_failure(exc) or type(exc).__name__ + (f": {exc}" if str(exc) else "")
            if isinstance(exc, aiohttp.ServerDisconnectedError) and url.startswith("https:") and not self._answered:
                reply.error += f": {TLS_CLOSED}"
        reply.elapsed = time.perf_counter() - started
        if "text/event-stream" in reply.content_type:
            reply.events = _sse_data(reply.raw)
        elif reply.raw:
            try:
                reply.body = json.loads(reply.raw)
            except ValueError:
                reply.body = None
        return reply


def _sse_data(raw: str) -> list[str]:
    """The ``data:`` payloads of an SSE stream, one per event (multi-line data joined)."""
    events = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        lines = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
        if lines:
            events.append("\n".join(lines))
    return events
