"""Parsing of human-friendly quantities used in scenarios and on the command line.

Durations are written as ``30s``, ``250ms``, ``2m``, ``1h30m`` or a bare number of seconds;
ratios as ``0.5%`` or ``0.005``. Both parse to plain floats (seconds, fraction) so that the
rest of the code never sees strings.
"""

from __future__ import annotations

import re

__all__ = ["SECOND", "parse_duration", "parse_ratio", "format_duration", "format_rate"]

SECOND = 1_000_000_000  # nanoseconds: every clock of a run (real and simulated) counts in them

_UNIT_SECONDS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s|m|h|d)")


def parse_duration(value: str | float | int) -> float:
    """Return seconds for ``value``; raise ValueError with the accepted forms otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, 250ms or 2m, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif not isinstance(value, str):
        raise ValueError(f"expected a duration such as 30s, 250ms or 2m, got {value!r}")
    else:
        text = value.strip().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
                pos = match.end()
            if pos != len(text) or not text:
                raise ValueError(f"expected a duration such as 30s, 250ms, 2m or 1h30m, got {value!r}") from None
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        raise ValueError(f"a duration must be a finite number >= 0, got {value!r}")
    return seconds


def parse_ratio(value: str | float | int) -> float:
    """Return a fraction for ``0.5%`` or ``0.005``."""
    if isinstance(value, bool):
        raise ValueError(f"expected a ratio such as 0.5% or 0.005, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a ratio such as 0.5% or 0.005, got {value!r}")
    text = value.strip()
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100.0
        return float(text)
    except ValueError:
        raise ValueError(f"expected a ratio such as 0.5% or 0.005, got {value!r}") from None


def format_duration(seconds: float) -> str:
    """Short human form: 850ms, 12.5s, 3m20s."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_rate(value: float) -> str:
    """A rate for people: from 100 up, one decimal with thousands separators (``10,143.8``); else 3 digits."""
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
