"""What the fault-injection proxy does to traffic: the fault set and the schedule that switches it.

Config is pure data. ``Faults`` is one set of knobs (every one off by default); a
``Schedule`` is the base set plus windows ``{at, until, faults}`` during which a window's
knobs replace the base ones (the knobs a window leaves out keep their base values; where
windows overlap, the later one in the list wins). Times are seconds from the proxy's start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from surgelab.units import parse_duration, parse_ratio
from surgelab.yamlfile import load_yaml

__all__ = ["Faults", "Window", "Schedule", "ProxyConfigError", "parse_latency", "parse_bandwidth", "read_schedule"]

_DROP_POINTS = ("any", "start", "mid-stream")


class ProxyConfigError(ValueError):
    """Unusable proxy configuration; the message is one line, fit for the CLI."""


def parse_latency(value: Any) -> tuple[float, float]:
    """``100ms`` (fixed) or ``50ms..200ms`` (uniform) as (low, high) seconds."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        low, high = (parse_duration(v) for v in value)
    elif isinstance(value, str) and ".." in value:
        a, _, b = value.partition("..")
        low, high = parse_duration(a), parse_duration(b)
    else:
        low = high = parse_duration(value)
    if high < low:
        raise ValueError(f"latency range must be low..high, got {value!r}")
    return low, high


_BANDWIDTH = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmg]i?)?(b|bit)?\s*(/s)?\s*$", re.I)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def parse_bandwidth(value: Any) -> float:
    """Bytes per second from ``1MB/s``, ``512KiB/s``, ``10Mbit/s`` or a bare number of bytes/s."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        match = _BANDWIDTH.match(str(value))
        if not match:
            raise ValueError(f"expected a bandwidth such as 1MB/s, 512KiB/s or 10Mbit/s, got {value!r}")
        number = float(match.group(1)) * _SCALE[(match.group(2) or "").lower()]
        if (match.group(3) or "").lower() == "bit":
            number /= 8
    if not number > 0 or number == float("inf"):
        raise ValueError(f"a bandwidth must be a finite number > 0, got {value!r}")
    return number


@dataclass(frozen=True)
class Faults:
    """One set of knobs. Probabilities are per request; durations are seconds."""

    latency: tuple[float, float] = (0.0, 0.0)
    """Added before the request is forwarded, uniform between the two bounds."""
    jitter_per_chunk: float = 0.0
    """Each response chunk is held a further uniform [0, jitter) seconds."""
    drop: float = 0.0
    """Probability that the client's connection is aborted (a TCP reset, no HTTP answer)."""
    drop_point: str = "any"
    """Where a drop happens: ``start`` (before the response), ``mid-stream`` (after the first chunk), ``any`` (either, 50/50)."""
    bandwidth: float | None = None
    """Bytes per second shared by every response passing through the proxy."""
    error_rate: float = 0.0
    """Probability that the proxy answers ``error_status`` itself, without asking the upstream."""
    error_status: int = 503
    stall_mid_stream: float = 0.0
    """Probability that a response stops after its first chunk and hangs, connection open."""
    stall_for: float = 300.0
    """How long a stalled response hangs before the proxy closes it (the client's timeout usually ends it first)."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], base: Faults | None = None, where: str = "faults") -> Faults:
        """Parse knobs such as ``{latency: 50ms..200ms, drop: 0.3%}`` over ``base``."""
        if not isinstance(raw, Mapping):
            raise ProxyConfigError(f"{where}: expected a mapping of fault knobs, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise ProxyConfigError(f"{where}.{key}: unknown fault (known: {', '.join(sorted(known))})")
            try:
                values[name] = _parse(name, value)
            except (ValueError, TypeError) as exc:
                raise ProxyConfigError(f"{where}.{key}: {exc}") from None
        faults = replace(base or cls(), **values)
        errors = faults.validate()
        if errors:
            raise ProxyConfigError(f"{where}: {'; '.join(errors)}")
        return faults

    def validate(self) -> list[str]:
        errors = [
            f"{name}: must be between 0 and 1, got {getattr(self, name)}"
            for name in ("drop", "error_rate", "stall_mid_stream")
            if not 0.0 <= getattr(self, name) <= 1.0
        ]
        if self.drop_point not in _DROP_POINTS:
            errors.append(f"drop_point: one of {', '.join(_DROP_POINTS)}, got {self.drop_point!r}")
        if not 400 <= self.error_status <= 599:
            errors.append(f"error_status: must be an HTTP error status, got {self.error_status}")
        return errors

    def describe(self) -> str:
        parts = []
        if self.latency[1] > 0:
            low, high = (f"{v * 1000:g}ms" for v in self.latency)
            parts.append(f"latency {low}" if low == high else f"latency {low}..{high}")
        if self.jitter_per_chunk:
            parts.append(f"jitter {self.jitter_per_chunk * 1000:g}ms/chunk")
        if self.drop:
            parts.append(f"drop {self.drop:.3%} ({self.drop_point})")
        if self.bandwidth:
            parts.append(f"bandwidth {self.bandwidth / 1e6:g} MB/s")
        if self.error_rate:
            parts.append(f"errors {self.error_rate:.3%} (HTTP {self.error_status})")
        if self.stall_mid_stream:
            parts.append(f"stall mid-stream {self.stall_mid_stream:.3%}")
        return ", ".join(parts) or "no faults"


def _parse(name: str, value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a value, got {value!r}")
    if name == "latency":
        return parse_latency(value)
    if name in ("jitter_per_chunk", "stall_for"):
        return parse_duration(value)
    if name in ("drop", "error_rate", "stall_mid_stream"):
        return parse_ratio(value)
    if name == "bandwidth":
        return None if value in (None, "off", "none") else parse_bandwidth(value)
    if name == "error_status":
        return int(value)
    return str(value)


@dataclass(frozen=True)
class Window:
    """Faults that hold from ``at`` until ``until`` seconds after the proxy started (None: to the end)."""

    at: float
    until: float | None
    faults: Faults


@dataclass(frozen=True)
class Schedule:
    """The base faults and the windows that override them."""

    base: Faults = Faults()
    windows: tuple[Window, ...] = ()

    def at(self, t_s: float) -> Faults:
        """The faults in force ``t_s`` seconds after the start."""
        current = self.base
        for window in self.windows:
            if window.at <= t_s and (window.until is None or t_s < window.until):
                current = window.faults
        return current

    @classmethod
    def from_list(cls, raw: Any, base: Faults = Faults(), source: str = "schedule") -> Schedule:
        """``[{at: 10s, until: 30s, faults: {...}}, ...]``; each window's faults lie over ``base``."""
        if not isinstance(raw, list):
            raise ProxyConfigError(f"{source}: expected a list of {{at, until, faults}} windows")
        windows = []
        for i, item in enumerate(raw):
            where = f"{source}[{i}]"
            if not isinstance(item, Mapping):
                raise ProxyConfigError(f"{where}: expected a mapping with at, until and faults")
            unknown = set(item) - {"at", "until", "faults"}
            if unknown:
                raise ProxyConfigError(f"{where}: unknown field {sorted(map(str, unknown))[0]!r} (at, until, faults)")
            try:
                at = parse_duration(item.get("at", 0))
                until = None if item.get("until") is None else parse_duration(item["until"])
            except (ValueError, TypeError) as exc:
                raise ProxyConfigError(f"{where}: {exc}") from None
            if until is not None and until <= at:
                raise ProxyConfigError(f"{where}: until ({until:g}s) must come after at ({at:g}s)")
            windows.append(Window(at, until, Faults.from_mapping(item.get("faults") or {}, base, f"{where}.faults")))
        return cls(base, tuple(windows))


def read_schedule(path: Path, base: Faults = Faults()) -> Schedule:
    """A schedule from YAML: a list of windows, or ``{windows: [...]}``."""
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProxyConfigError(f"{path}: cannot read schedule: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None)
        raise ProxyConfigError(f"{path}:{mark.line + 1 if mark else 1}: invalid YAML" + (f": {problem}" if problem else "")) from None
    if isinstance(raw, Mapping) and "windows" in raw:
        raw = raw["windows"]
    return Schedule.from_list(raw, base, str(path))
