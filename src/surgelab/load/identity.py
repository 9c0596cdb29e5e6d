"""Request identity: what the records keep of a scheduled request, the same for a run and a simulation.

Its ids come from the phase's plan (request, session, turn), its class, tier and kind from its spec,
its warm-up flag from its intended time.
"""

from __future__ import annotations

from surgelab.load.phases import PhasePlan
from surgelab.metrics.store import MetaRow, RecordMeta
from surgelab.workload.request import RequestSpec

__all__ = ["meta_for", "meta_row"]


def meta_for(plan: PhasePlan, index: int, spec: RequestSpec, intended: int, user: int, turn: int = 0) -> RecordMeta:
    """What the records keep of a scheduled request: its ids from the plan, its class from the spec."""
    return RecordMeta(*meta_row(plan, index, spec, intended, user, turn))


def meta_row(plan: PhasePlan, index: int, spec: RequestSpec, intended: int, user: int, turn: int = 0) -> MetaRow:
    """``meta_for`` as a ``MetaRow`` (what a simulation keeps: one per request)."""
    return MetaRow(  # positional, in field order
        plan.request_id(index, turn),  # id
        intended,  # intended_ns
        intended < plan.warmup_end_ns,  # warmup
        user,
        plan.phase.name,  # phase
        spec.request_class,
        spec.tier,
        plan.session_id(index, turn),  # session
        turn,
        spec.kind or "",  # kind
        spec.step or None,  # step
    )
