"""Typed configuration of ``surgelab serve``: the engine profile, the API surface, the faults.

Config is pure data. The CLI (or a test) builds it; runtime state such as RNGs, timers and
counters lives in the objects that use it (``faults.FaultInjector``, ``app.InferenceServer``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from surgelab.engine import EngineProfile
from surgelab.units import parse_duration, parse_ratio
from surgelab.yamlfile import load_yaml

__all__ = ["ConfigError", "FaultConfig", "ServerConfig", "read_fault_file"]


class ConfigError(ValueError):
    """Unusable server configuration; the message is one line, fit for the CLI."""


_DURATIONS = ("retry_after", "spike_delay", "cold_start", "crash_after", "stall_after")
_RATIOS = ("error_rate", "spike_probability")
_COUNTS = ("error_status", "max_inflight", "leak_per_request")


@dataclass(frozen=True)
class FaultConfig:
    """Misbehaviour to inject; every knob defaults to off. Durations are seconds."""

    error_rate: float = 0.0
    """Fraction of inference requests answered with ``error_status`` and a JSON error body."""
    error_status: int = 500
    max_inflight: int | None = None
    """Rate limit: inference requests beyond this many in flight get 429 with Retry-After."""
    retry_after: float = 1.0
    spike_probability: float = 0.0
    """Fraction of inference requests held for ``spike_delay`` before they reach the engine."""
    spike_delay: float = 0.0
    cold_start: float = 0.0
    """The first inference request starts a 'model load' of this long; all requests wait it out."""
    crash_after: float | None = None
    """The process exits (status 1) this long after start."""
    stall_after: float | None = None
    """This long after start the server stops answering anything, without exiting."""
    leak_per_request: int = 0
    """Bytes kept for ever per inference request: a memory leak for a soak to find."""

    def validate(self) -> list[str]:
        errors = []
        for name in _RATIOS:
            if not 0.0 <= getattr(self, name) <= 1.0:
                errors.append(f"{name}: must be between 0 and 1, got {getattr(self, name)}")
        if not 400 <= self.error_status <= 599:
            errors.append(f"error_status: must be an HTTP error status, got {self.error_status}")
        if self.leak_per_request < 0:
            errors.append(f"leak_per_request: must be >= 0 bytes, got {self.leak_per_request}")
        if self.max_inflight is not None and self.max_inflight < 1:
            errors.append(f"max_inflight: must be >= 1, got {self.max_inflight}")
        return errors

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> FaultConfig:
        """Parse ``30s``/``250ms`` durations and ``2%`` ratios; ConfigError lists every problem."""
        known = {f.name for f in fields(cls)}
        errors = [f"unknown fault {key!r} (known: {', '.join(sorted(known))})" for key in data if key not in known]
        values: dict[str, Any] = {}
        for key, raw in data.items():
            if key not in known or raw is None:
                continue
            try:
                values[key] = _parse(key, raw)
            except ValueError as exc:
                errors.append(f"{key}: {exc}")
        if not errors:
            errors = cls(**values).validate()
        if errors:
            raise ConfigError("; ".join(errors))
        return cls(**values)


def _parse(key: str, raw: Any) -> float | int:
    if key in _DURATIONS:
        return parse_duration(raw)
    if key in _RATIOS:
        return parse_ratio(raw)
    whole = isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit())
    if key in _COUNTS and whole and not isinstance(raw, bool):
        return int(raw)
    raise ValueError(f"expected a whole number, got {raw!r}")


def read_fault_file(path: Path) -> dict[str, Any]:
    """The raw mapping in a YAML fault file (merged with flags before parsing)."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read fault file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"fault file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"fault file {path} must contain a mapping such as 'error_rate: 1%'")
    return dict(data)


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``surgelab serve`` needs; ``model`` defaults to the profile's model name."""

    profile: EngineProfile
    host: str = "127.0.0.1"
    port: int = 8000
    model: str | None = None
    seed: int = 0
    prefix_caching: bool = True
    typical_output_tokens: int = 128
    """Median of the output lengths the server picks when the caller does not force one."""
    tool_call_fraction: float = 1.0
    """Of the requests that offer tools (and do not bring a tool's result), the share answered with a tool call."""
    embedding_dim: int = 384
    session_header: str = "X-Session-ID"
    """A request header echoed in the answer (and counted): what a client pinning sessions sends."""
    faults: FaultConfig = field(default_factory=FaultConfig)
    token: str | None = None
    """When set, every request but GET /health needs ``Authorization: Bearer TOKEN``."""
    tls_cert: str | None = None
    """PEM certificate chain (and key, unless ``tls_key``): serve HTTPS."""
    tls_key: str | None = None
    tls_client_ca: str | None = None
    """PEM CA: require client certificates it signed (mutual TLS)."""

    @property
    def served_model(self) -> str:
        return self.model or self.profile.model
