"""One judgement of every request against its objectives, used by every goodput in summary.json.

A request is judged by its tier's own objectives, then its kind's (``kinds.<kind>.slo``), then
the scenario's ``slo`` for whatever those two leave unset — and only by the objectives that fit
its kind (``surgelab.kinds``): TTFT where there is a first token (chat, completions, vision, responses and
messages — the whole answer when not streamed —, the first audio byte of speech, a flow's last step), ITL
and TPOT only where tokens are streamed, E2E everywhere. An embedding or a rerank is never a miss for want of a
first token. The headline, ``by_phase``, ``by_class``, ``by_tier`` and ``by_kind`` all count the
same rows as good, so their goodputs add up.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from surgelab.kinds import KINDS
from surgelab.scenario.model import Scenario, Slo

__all__ = ["objectives", "fitting", "meets_slo", "kinds_of", "goodput", "slo_ms"]

_FIELDS = ("ttft", "itl", "tpot", "e2e")


def objectives(scenario: Scenario, tier: str, kind: str) -> Slo:
    """The objectives a request of ``tier`` and ``kind`` is judged by (before ``fitting``)."""
    own_tier = scenario.tiers[tier].slo if tier in scenario.tiers else Slo()
    own_kind = scenario.kinds[kind].slo if kind in scenario.kinds else Slo()
    values = {}
    for name in _FIELDS:
        chosen = (getattr(s, name) for s in (own_tier, own_kind, scenario.slo))
        values[name] = next((v for v in chosen if v is not None), None)
    return Slo(**values)


def fitting(slo: Slo, kind: str, stream: bool) -> Slo:
    """Only the objectives that fit ``kind`` (its spec's ``slo_fields``): TTFT where there is a first token,
    ITL and TPOT where tokens stream; E2E alone for a kind the registry does not know."""
    spec = KINDS.get(kind)
    fields = spec.slo_fields(stream) if spec is not None else ("e2e",)
    return Slo(**{name: getattr(slo, name) if name in fields else None for name in _FIELDS})


def kinds_of(c: Any, scenario: Scenario) -> Any:
    """Each row's kind; a record written before kinds existed counts as ``target.endpoint``."""
    return c.kind.replace("", scenario.target.endpoint)


def meets_slo(c: Any, mask: np.ndarray, scenario: Scenario) -> np.ndarray:
    """Rows of ``mask`` meeting every objective that applies to them (``c``: the summary's ``RecordColumns``)."""
    good = mask.copy()
    if not mask.any():
        return good
    kinds = kinds_of(c, scenario)
    mean_itl = None
    with np.errstate(invalid="ignore", divide="ignore"):
        for tier in c.tier[mask].distinct():
            in_tier = mask & (c.tier == tier)
            for kind in kinds[in_tier].distinct():
                slo = fitting(objectives(scenario, str(tier), str(kind)), str(kind), scenario.target.stream)
                rows = in_tier & (kinds == kind)
                if slo.ttft is not None:
                    good[rows] &= (c.first_token[rows] - c.intended[rows]) <= slo.ttft
                if slo.e2e is not None:
                    good[rows] &= (c.end[rows] - c.intended[rows]) <= slo.e2e
                if slo.tpot is not None:
                    out = c.output[rows]
                    tpot = np.where(out > 1, (c.end[rows] - c.first_token[rows]) / np.maximum(out - 1, 1), 0.0)
                    good[rows] &= tpot <= slo.tpot
                if slo.itl is not None:
                    mean_itl = c.mean_itl() if mean_itl is None else mean_itl
                    good[rows] &= np.nan_to_num(mean_itl[rows], nan=0.0) <= slo.itl
    return good


def slo_ms(slo: Slo) -> dict[str, float | None]:
    return {k: (v * 1000 if v is not None else None) for k, v in slo.model_dump().items()}


def goodput(c: Any, measured: np.ndarray, ok_in_window: np.ndarray, window: Any, scenario: Scenario, shown: Slo) -> dict[str, Any]:
    """The goodput block of one group of rows — the headline's and every breakdown's.

    ``measured``: the group's rows after the warm-up, which the fraction counts (every one that did
    not succeed against it); ``ok_in_window``: its successes that ended in the window, which the
    rate counts; ``shown``: the objectives the block reports (``slo_ms``).
    """
    ok = measured & c.outcomes.ok
    good = meets_slo(c, ok_in_window | ok, scenario)  # judged once: rates by window, the fraction by intended time
    counted = int((measured & c.outcomes.counted).sum())
    return {
        "requests_per_s": window.per_s(float((good & ok_in_window).sum())),
        "fraction": float((good & ok).sum()) / counted if counted else None,
        "slo_ms": slo_ms(shown),
    }
