"""Scoring targets against a requirement profile: a pass/fail matrix and a weighted ranking.

Each requirement is judged on the *worst* measurement of a target when several inputs measured
it (the largest P90 of three runs for ``p90(e2e) <= 3s``): a provider is chosen for its bad
days. No measurement fails, and says which command would have measured it. The score is the
passed weight ÷ the total weight; a failed ``must`` requirement disqualifies whatever the score,
and disqualified targets rank after qualified ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from surgelab.providers.cost import cost_per_mtok
from surgelab.providers.evidence import TargetEvidence
from surgelab.providers.measured import Measured
from surgelab.providers.requirements import Requirement, RequirementProfile
from surgelab.scenario.model import Price

__all__ = ["Verdict", "Rank", "Scorecard", "score", "format_value", "quota_limited"]

_HOW_TO_MEASURE = {
    "run": "no run measured it (surgelab run / compare)",
    "probe": "no probe measured it (surgelab probe)",
    "history": "no monitoring history for it (surgelab monitor, then score --history)",
    "cost": "no price or no run for it (targets[].price in --scenario, and a run)",
    "declared": "nothing declared for it (a declared-facts .yaml: docs/providers.md)",
}


@dataclass(frozen=True)
class Verdict:
    target: str
    requirement: Requirement
    observed: float | None
    passed: bool
    source: str
    how: str
    items: tuple[str, ...] | None = None
    declared: bool = False

    @property
    def evidence(self) -> str:
        """``measured``, ``declared`` or ``none``: what the verdict rests on."""
        return "none" if self.observed is None and self.items is None else "declared" if self.declared else "measured"

    def shown(self) -> str:
        if self.items is not None:
            return ", ".join(self.items) or "none"
        return "" if self.observed is None else format_value(self.observed, self.requirement.unit)

    def explain(self) -> str:
        r = self.requirement
        if self.evidence == "none":
            return f"{self.target}: {r.label} — not measured: {self.how}"
        needs = f"includes {', '.join(r.items)}" if r.op == "includes" else f"{r.op} {format_value(r.value, r.unit)}"
        return f"{self.target}: {r.label} — {self.evidence} {self.shown()}, needs {needs} ({self.how}; {self.source})"


@dataclass(frozen=True)
class Rank:
    target: str
    score: float  # passed weight ÷ total weight
    passed_weight: float
    total_weight: float
    qualified: bool
    failed_musts: list[str] = field(default_factory=list)


@dataclass
class Scorecard:
    profile: RequirementProfile
    targets: list[str]
    verdicts: list[Verdict]
    ranking: list[Rank]
    quota_limited: dict[str, list[str]] = field(default_factory=dict)  # target -> why its runs were throttled

    def verdict(self, target: str, index: int) -> Verdict:
        return [v for v in self.verdicts if v.target == target][index]

    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "targets": self.targets,
            "requirements": [
                {"group": r.group, "require": r.require, "weight": r.weight, "must": r.must}
                for r in self.profile.requirements()
            ],  # fmt: skip
            "matrix": {
                t: [
                    {
                        "require": v.requirement.require,
                        "observed": v.observed,
                        "passed": v.passed,
                        "items": list(v.items) if v.items is not None else None,
                        "evidence": v.evidence,
                        "source": v.source,
                        "how": v.how,
                    }
                    for v in self.verdicts
                    if v.target == t
                ]
                for t in self.targets
            },  # fmt: skip
            "ranking": [r.__dict__ for r in self.ranking],
            "quota_limited": self.quota_limited,
        }


def format_value(value: float, unit: str) -> str:
    if unit == "seconds":
        return f"{value:.3g} s" if value >= 1 else f"{value * 1000:.0f} ms" if value >= 0.01 else f"{value * 1000:.2g} ms"
    if unit == "ratio":
        return f"{value:.2%}"
    if unit == "pass":
        return "pass" if value >= 1 else "fail"
    if unit in ("tokens", "turns", "count"):
        return f"{value:,.0f} {unit}"
    if unit == "times":
        return f"{value:.2f}×"
    if unit == "set":
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _worst(r: Requirement, found: list[Measured]) -> Measured | None:
    known = [m for m in found if m.value is not None and m.value == m.value]
    if not known:
        return found[0] if found else None
    if r.op == "includes":  # a measurement beats a declaration; among them, one that fails
        ranked = sorted(known, key=lambda m: (m.declared, r.passes(m.value, m.items)))
        return ranked[0]
    if r.op in ("<", "<="):
        return max(known, key=lambda m: m.value or 0.0)
    if r.op in (">", ">="):
        return min(known, key=lambda m: m.value or 0.0)
    failing = [m for m in known if not r.passes(m.value)]
    return (failing or known)[0]


def _measurements(r: Requirement, ev: TargetEvidence, prices: dict[str, Price | None]) -> list[Measured]:
    if r.source == "run":
        return ev.run_metric(r.metric)
    if r.source == "cost":
        if ev.name not in prices:
            return []
        costs = [(src, cost_per_mtok(ev.name, prices[ev.name], block)) for src, block in ev.summaries]
        return [Measured(c.per_mtok, src, c.how) for src, c in costs]
    return ev.values.get(r.metric, [])


def score(
    profile: RequirementProfile, evidence: dict[str, TargetEvidence], prices: dict[str, Price | None] | None = None
) -> Scorecard:
    """Judge every target on every requirement and rank them."""
    prices = prices or {}
    requirements = profile.requirements()
    verdicts: list[Verdict] = []
    ranking: list[Rank] = []
    for name, ev in evidence.items():
        passed_weight, musts = 0.0, []
        for r in requirements:
            m = _worst(r, _measurements(r, ev, prices))
            ok = m is not None and r.passes(m.value, m.items)
            how = m.how if m is not None and m.value is not None else (m.how if m else "") or _HOW_TO_MEASURE[r.source]
            verdicts.append(Verdict(name, r, m.value if m else None, ok, m.source if m else "", how,
                                    m.items if m else None, m.declared if m else False))  # fmt: skip
            if ok:
                passed_weight += r.weight
            elif r.must:
                musts.append(r.label)
        total = sum(r.weight for r in requirements)
        ranking.append(Rank(name, passed_weight / total if total else 0.0, passed_weight, total, not musts, musts))
    ranking.sort(key=lambda k: (not k.qualified, -k.score, k.target))
    return Scorecard(profile, list(evidence), verdicts, ranking, quota_limited(evidence))


def quota_limited(evidence: dict[str, TargetEvidence]) -> dict[str, list[str]]:
    """Per target, the runs its provider's quota throttled (``rate_limits.quota_limited``), each with its verdict."""
    found: dict[str, list[str]] = {}
    for name, ev in evidence.items():
        for source, block in ev.summaries:
            limits = block.get("rate_limits") or {}
            if limits.get("quota_limited"):
                found.setdefault(name, []).append(f"{source}: {limits.get('verdict')}")
    return found
