"""Rate-limit signals in response headers, read into four numbers per request.

Hosted APIs say how much of their quota is left on every answer, each in its own words:

| who | headers |
|---|---|
| OpenAI, Azure OpenAI, Groq, Together, most OpenAI-compatible gateways | ``x-ratelimit-remaining-requests``, ``x-ratelimit-remaining-tokens``, ``x-ratelimit-reset-requests``, ``x-ratelimit-reset-tokens`` (durations such as ``1s``, ``6m0s``, ``12ms``) |
| Anthropic | ``anthropic-ratelimit-requests-remaining``, ``…-tokens-remaining``, ``…-input-tokens-remaining``, ``…-output-tokens-remaining``, each with a ``…-reset`` (an RFC 3339 time) |
| IETF drafts, API gateways | ``RateLimit-Remaining`` and ``RateLimit-Reset`` (seconds), ``RateLimit: "default";r=50;t=30``, ``X-RateLimit-Remaining`` and ``X-RateLimit-Reset`` (seconds, or a Unix time) |
| everyone | ``Retry-After`` (seconds or an HTTP date), ``retry-after-ms``, Azure's ``x-ms-retry-after-ms`` |

``read_limits`` reduces them to what the records keep (docs/records.md): the fewest requests
left, the fewest tokens left (of every token limit named), the longest wait until a limit
resets, and the wait the server asked for. Headers it cannot read are ignored.
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = ["Limits", "read_limits", "duration_seconds"]

_PREFIXES = (b"x-ratelimit", b"anthropic-ratelimit", b"ratelimit", b"retry-after", b"x-ms-retry-after")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_STRUCTURED = re.compile(r"\b([rt])=(\d+)")
_EPOCH = 1_000_000_000  # a reset above this is a Unix time, not a number of seconds


@dataclass(slots=True)
class Limits:
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_s: float | None = None
    retry_after_s: float | None = None


def duration_seconds(value: str) -> float | None:
    """``6m0s``, ``1.5s``, ``12ms``, ``20`` (seconds), an RFC 3339 or HTTP date, or a Unix time: seconds from now."""
    text = value.strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        return max(number - time.time(), 0.0) if number > _EPOCH else max(number, 0.0)
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        return sum(float(n) * _UNIT_S[u] for n, u in parts)
    when = None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def _count(value: str) -> int | None:
    text = value.strip().split(",")[0].split(";")[0].strip()
    return int(text) if text.isdigit() else None  # Azure's -1 ("not reported") is not a count


def read_limits(raw_headers: list[tuple[bytes, bytes]]) -> Limits | None:
    """The rate-limit signals among ``raw_headers``; None when there are none (the usual case, cheaply)."""
    limits: Limits | None = None
    for raw_name, raw_value in raw_headers:
        name = raw_name.lower()
        if not name.startswith(_PREFIXES):
            continue
        if limits is None:
            limits = Limits()
        text, value = name.decode("latin-1"), raw_value.decode("latin-1")
        if text in ("retry-after", "retry-after-ms", "x-ms-retry-after-ms"):
            seconds = duration_seconds(value) if text == "retry-after" else _ms(value)
            if seconds is not None:
                limits.retry_after_s = seconds
        elif text == "ratelimit":  # RateLimit: "default";r=50;t=30
            fields = dict(_STRUCTURED.findall(value))
            if "r" in fields:
                limits.remaining_requests = _least(limits.remaining_requests, int(fields["r"]))
            if "t" in fields:
                limits.reset_s = _most(limits.reset_s, float(fields["t"]))
        elif "remaining" in text:
            count = _count(value)
            if count is None:
                continue
            if "token" in text:
                limits.remaining_tokens = _least(limits.remaining_tokens, count)
            else:
                limits.remaining_requests = _least(limits.remaining_requests, count)
        elif "reset" in text:
            seconds = duration_seconds(value)
            if seconds is not None:
                limits.reset_s = _most(limits.reset_s, seconds)
    return limits


def _ms(value: str) -> float | None:
    try:
        return max(float(value.strip()) / 1000, 0.0)
    except ValueError:
        return None


def _least(old: int | None, new: int) -> int:
    return new if old is None else min(old, new)


def _most(old: float | None, new: float) -> float:
    return new if old is None else max(old, new)
