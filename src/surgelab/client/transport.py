"""One HTTP exchange per call: session, timeouts, and the classification of every failure.

A kind (``client/kinds/``) builds an ``HttpCall`` and reads the response into the
``Outcome``; ``Transport.exchange`` does everything in between and never raises for a
failed request: the failure becomes the outcome's state. Only cancellation propagates.
The first-token deadline covers the call until the reader reports its first content
(``on_first``); after that only the total deadline applies.

Around the exchange it keeps what the network said: a new connection's connect and TLS
times, the redirects followed (``target.redirects``; a 3xx not followed is an ``http_error``
whose error says how to follow it), and the provider's rate-limit headers (``client/ratelimit.py``).
A TLS failure's error says what to do about it (``client/network.py``).
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from secrets import token_hex
from typing import Any
from urllib.parse import urljoin, urlsplit

from surgelab._compat import timeout_at
from surgelab.client.hints import base_hint, url_fix
from surgelab.client.http1 import ConnectTimeout, HttpPool, InvalidResponse, Response
from surgelab.client.network import target_ssl, tls_failure
from surgelab.client.ratelimit import duration_seconds, read_limits
from surgelab.client.timer import SendTimer
from surgelab.metrics.record import Outcome, State
from surgelab.redact import redact_text, redact_url, url_credentials
from surgelab.scenario.model import Target

__all__ = [
    "HttpCall",
    "Transport",
    "ProtocolError",
    "Reader",
    "multipart",
    "read_body",
    "retry_after_seconds",
]

_SECRET_HEADER = re.compile(r"auth|api[-_]?key|token|cookie|secret", re.I)
_REDIRECTS = frozenset((301, 302, 303, 307, 308))
_DRAIN_BYTES = 65536  # of a redirect's body, read so its connection can be reused


class ProtocolError(Exception):
    """The server answered, but not with a valid response for the request's kind."""


@dataclass(frozen=True, slots=True)
class HttpCall:
    """One HTTP request, ready to send."""

    url: str
    data: bytes | None = None
    method: str = "POST"
    headers: Mapping[str, str | None] = field(default_factory=dict)
    """Added to the client's headers; a None leaves one of them out (``x-api-key`` sends no Authorization)."""
    auth: str = "bearer"
    """How the API key goes: ``bearer`` (``Authorization: Bearer``) or ``x-api-key`` (Anthropic's header)."""


Reader = Callable[[Response, Outcome, Callable[[], None]], Awaitable[None]]
"""Reads a successful response into the outcome; calls its third argument at the first content."""


class Transport:
    """The connection pool every kind sends through (``client/http1.py``); use as an async context manager."""

    def __init__(
        self, target: Target, clock: Callable[[], int], api_key: str | None = None, pool_size: int = 0
    ) -> None:
        self.target = target
        self.clock = clock
        self.headers = {"Content-Type": "application/json", **target.headers}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        # a call that sends the key its own way: instead of the Bearer header, not beside it
        self._auth: dict[str, dict[str, str | None]] = {"bearer": {}}
        self._auth["x-api-key"] = {"Authorization": None, "x-api-key": api_key} if api_key else {}
        secrets = {api_key or ""}
        written = url_credentials(target.base_url)  # https://user:pass@host/v1: HTTP Basic, as curl does
        if written is not None:
            if not any(name.lower() == "authorization" for name in self.headers):
                basic = base64.b64encode(f"{written[0]}:{written[1]}".encode()).decode("ascii")
                self.headers["Authorization"] = f"Basic {basic}"
            secrets.update(written)
        for name, value in self.headers.items():
            if _SECRET_HEADER.search(name):
                secrets.update((value, value.split()[-1] if value.split() else ""))
        self._secrets = sorted((s for s in secrets if len(s) >= 8), key=len, reverse=True)
        self._pool_size = pool_size
        self._pool: HttpPool | None = None
        self._timer = SendTimer()

    async def __aenter__(self) -> Transport:
        self._pool = HttpPool(
            self.headers,
            limit=self._pool_size,
            connect_timeout=self.target.timeouts.connect,
            keep_alive=self.target.connection != "close",
            tls=target_ssl(self.target),
            server_name=self.target.tls.server_name,
            proxy=self.target.proxy,
        )
        self._timer.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._timer.close()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def exchange(self, call: HttpCall, out: Outcome, read: Reader, at_ns: int | None = None) -> None:
        """Send ``call`` (not before ``at_ns``) and let ``read`` take the response; every failure ends in ``out.state``."""
        assert self._pool is not None, "use the client as an async context manager"
        timeouts = self.target.timeouts
        clock = self.clock
        own_auth = self._auth[call.auth]
        if own_auth:
            call = replace(call, headers={**call.headers, **own_auth})
        exchange = self._pool.request(call.method, call.url, call.data, call.headers)
        if at_ns is not None:
            await self._timer.wait_until(clock, at_ns)
        started = asyncio.get_running_loop().time()
        out.sent_ns = clock()
        stage = "first token"
        url, method, data = call.url, call.method, call.data
        try:
            async with timeout_at(started + min(timeouts.first_token, timeouts.total)) as deadline:
                while True:
                    async with exchange as resp:
                        out.first_byte_ns = clock()
                        self._note(resp, out)
                        if resp.status in _REDIRECTS:
                            step = await self._redirect(resp, out, call, url, method, data)
                            if isinstance(step, str):
                                out.fail(State.HTTP_ERROR, step, clock())
                                return
                            exchange, url, method, data = step
                            continue
                        if resp.status >= 400:
                            text = self.scrub((await resp.content.read(2048)).decode("utf-8", "replace")).strip()
                            out.fail(State.HTTP_ERROR, self._failed(resp.status, url, text), clock())
                            return
                        await read(resp, out, lambda: deadline.reschedule(started + timeouts.total))
                        stage = "total"
                        return
        except ConnectTimeout as exc:
            out.fail(State.TIMEOUT, f"connect timeout after {timeouts.connect:g}s: {exc}", clock())
        except asyncio.TimeoutError:  # noqa: UP041 - on 3.10 async_timeout raises this, not the builtin
            if out.first_token_ns is not None:
                stage = "total"
            limit = timeouts.total if stage == "total" else min(timeouts.first_token, timeouts.total)
            out.fail(State.TIMEOUT, f"{stage} timeout after {limit:g}s", clock())
        except ProtocolError as exc:
            out.fail(State.PROTOCOL_ERROR, str(exc), clock())
        except InvalidResponse as exc:  # the bytes back were not valid HTTP
            out.fail(State.PROTOCOL_ERROR, str(exc), clock())
        except OSError as exc:
            out.fail(State.CONNECTION_ERROR, tls_failure(exc) or f"{type(exc).__name__}: {exc}", clock())
        finally:
            if out.error:
                out.error = self.scrub(out.error)

    def _failed(self, status: int, url: str, text: str) -> str:
        """An HTTP error as recorded: the server's words, and the fix when they point at a known mistake."""
        if status in (404, 405):
            fix = url_fix(self.target.base_url, url)
            if fix is not None:
                return f"HTTP {status} at {redact_url(url)}: {text} — {base_hint(redact_url(fix))}"
        hint = tls_failure(Exception(text)) if status in (400, 495, 496) else None
        return f"HTTP {status}: {text}" + (f" — {hint}" if hint else "")

    @staticmethod
    def _note(resp: Response, out: Outcome) -> None:
        """What the answer's head says about the network: a new connection's times, a resend, the quota left."""
        out.resends += resp.resent
        out.http_status = resp.status
        if resp.connect_ns is not None:  # a new connection (several with redirects or resends: their sum)
            out.connect_ms = (out.connect_ms or 0.0) + resp.connect_ns / 1e6
        if resp.tls_ns is not None:
            out.tls_ms = (out.tls_ms or 0.0) + resp.tls_ns / 1e6
        limits = read_limits(resp.raw_headers)
        if limits is not None:
            out.ratelimit_requests, out.ratelimit_tokens = limits.remaining_requests, limits.remaining_tokens
            out.ratelimit_reset_s, out.retry_after_s = limits.reset_s, limits.retry_after_s

    async def _redirect(
        self, resp: Response, out: Outcome, call: HttpCall, url: str, method: str, data: bytes | None
    ) -> tuple[Any, str, str, bytes | None] | str:
        """The next exchange of a redirect that is followed (and its URL, method, body), or the error saying why not."""
        given = resp.headers.get("Location", "").strip()
        if not given:
            return f"HTTP {resp.status} redirect without a Location header"
        location = urljoin(url, given)
        refusal = self._refusal(resp.status, method, out.redirects, location)
        if refusal is not None:
            return f"HTTP {resp.status} redirect to {location}: {refusal}"
        await resp.content.read(_DRAIN_BYTES)  # so the connection can carry the next request
        same_origin = _origin(location) == _origin(url)
        headers = call.headers if same_origin else self._without_secrets(call.headers)
        if resp.status == 303:
            method, data = "GET", None
        out.redirects += 1
        assert self._pool is not None
        return self._pool.request(method, location, data, headers), location, method, data

    def _refusal(self, status: int, method: str, followed: int, location: str) -> str | None:
        """Why a redirect is not followed (with what to do), or None to follow it."""
        allowed = self.target.redirects
        if not allowed:
            return "not followed (redirects are off): point target.url at the new address, or follow with --follow-redirects N"
        if followed >= allowed:
            return f"not followed: more than {allowed} redirects (target.redirects)"
        if urlsplit(location).scheme not in ("http", "https"):
            return "not followed: not an http(s) address"
        if status in (301, 302) and method not in ("GET", "HEAD"):
            return f"not followed: a {status} would turn this {method} into a GET; point target.url at the new address"
        return None

    def _without_secrets(self, headers: Mapping[str, str | None]) -> dict[str, str | None]:
        """``headers`` with every credential removed: a redirect to another origin does not take the key along."""
        dropped: dict[str, str | None] = {name: None for name in self.headers if _SECRET_HEADER.search(name)}
        return {**dropped, **{k: v for k, v in headers.items() if not _SECRET_HEADER.search(k)}}

    def scrub(self, text: str) -> str:
        """Servers and gateways may echo the key in an error; records must never hold it."""
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return redact_text(text)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


async def read_body(resp: Response, limit: int) -> bytes:
    """The whole body, but never more than ``limit`` bytes in memory (``target.max_response_bytes``)."""
    if resp.content_length is not None and resp.content_length > limit:
        raise ProtocolError(f"response body of {resp.content_length} bytes is over max_response_bytes ({limit})")
    body = bytearray()
    async for chunk in resp.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise ProtocolError(f"response body over max_response_bytes ({limit})")
    return bytes(body)


def multipart(fields: Mapping[str, str | tuple[bytes, str, str]]) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type; a field is text or (bytes, filename, content type)."""
    boundary = f"surgelab-{token_hex(12)}"
    parts = []
    for name, value in fields.items():
        if isinstance(value, tuple):
            data, filename, content_type = value
            head = (
                f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\nContent-Type: {content_type}'
            )
        else:
            data, head = value.encode(), f'Content-Disposition: form-data; name="{name}"'
        parts.append(f"--{boundary}\r\n{head}\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header (delta-seconds or an HTTP date) in seconds from now; None when absent or unreadable."""
    return duration_seconds(value) if value else None
