"""What a probe reports and what bounds it: shared by the quick probes (``probes``) and the
memory probes (``probe_memory``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ProbeResult", "ProbeSettings"]


@dataclass
class ProbeResult:
    name: str
    metric: str  # the requirement metric it measures
    value: float | None  # None: could not be measured
    found: str  # one line: what was found
    how: str  # one line: how it was found
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeSettings:
    """Bounds of the probes; every loop stops at a step count and a time budget."""

    idle: float = 0.0  # cold start: wait this long before the first request
    warm_requests: int = 3
    context_limit: int = 262_144  # max context: never try a longer prompt
    context_steps: int = 32
    context_budget: float = 180.0  # seconds for the whole context search
    context_precision: float = 0.001  # stop when the bracket is within 0.1 % (0: to the token)
    turns: int = 24  # multi-turn: the longest conversation tried
    checkpoints: tuple[int, ...] = (2, 5, 10, 15, 20, 24)
    only: tuple[str, ...] = ()  # run only these probes (names of PROBES)
    network_samples: int = 5  # TCP (and TLS) connections timed by the network probe
    burst_size: int = 8  # simultaneous requests of the burst probe
