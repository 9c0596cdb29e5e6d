"""One HTTP exchange per call: session, timeouts, and the classification of every failure.

A kind (``client/kinds/``) builds an ``HttpCall`` and reads the response into the
``Outcome``; ``Transport.exchange`` does everything in between and never raises for a
failed request: the failure becomes the outcome's state. Only cancellation propagates.
The first-token deadline covers the call until the reader reports its first content
(``on_first``); after that only the total deadline applies.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from secrets import token_hex

from surgelab._compat import timeout_at
from surgelab.client.http1 import ConnectTimeout, HttpPool, InvalidResponse, Response
from surgelab.client.timer import SendTimer
from surgelab.metrics.record import Outcome, State
from surgelab.redact import redact_text, url_credentials
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


class ProtocolError(Exception):
    """The server answered, but not with a valid response for the request's kind."""


@dataclass(frozen=True, slots=True)
class HttpCall:
    """One HTTP request, ready to send."""

    url: str
    data: bytes | None = None
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)


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
        exchange = self._pool.request(call.method, call.url, call.data, call.headers)
        if at_ns is not None:
            await self._timer.wait_until(clock, at_ns)
        started = asyncio.get_running_loop().time()
        out.sent_ns = clock()
        stage = "first token"
        try:
            async with timeout_at(started + min(timeouts.first_token, timeouts.total)) as deadline:  # noqa: SIM117
                async with exchange as resp:
                    out.first_byte_ns = clock()
                    out.resends += resp.resent
                    out.http_status = resp.status
                    if resp.status >= 400:
                        out.retry_after_s = retry_after_seconds(resp.headers.get("Retry-After"))
                        text = self.scrub((await resp.content.read(2048)).decode("utf-8", "replace"))
                        out.fail(State.HTTP_ERROR, f"HTTP {resp.status}: {text.strip()}", clock())
                        return
                    await read(resp, out, lambda: deadline.reschedule(started + timeouts.total))
                    stage = "total"
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
            out.fail(State.CONNECTION_ERROR, f"{type(exc).__name__}: {exc}", clock())
        finally:
            if out.error:
                out.error = self.scrub(out.error)

    def scrub(self, text: str) -> str:
        """Servers and gateways may echo the key in an error; records must never hold it."""
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return redact_text(text)


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
    if not value:
        return None
    try:
        return max(float(value.strip()), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)
