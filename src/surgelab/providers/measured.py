"""One measured value with where it came from and how it was obtained: the unit of evidence
that runs, probes and histories all hand to scoring."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Measured"]


@dataclass(frozen=True)
class Measured:
    value: float | None
    source: str
    how: str = ""
