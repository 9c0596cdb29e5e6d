"""One value with where it came from and how it was obtained: the unit of evidence that runs,
probes, histories and a provider's declared facts all hand to scoring. ``declared`` marks a
fact the provider states (with its source and date) rather than one surgelab measured; ``items``
holds a set-valued fact (model families, regions, compliance terms)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Measured"]


@dataclass(frozen=True)
class Measured:
    value: float | None
    source: str
    how: str = ""
    items: tuple[str, ...] | None = None
    declared: bool = False
