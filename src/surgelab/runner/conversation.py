"""Multi-turn sessions: each turn waits for the previous answer, thinks, and resends the history
(or, with ``session.previous_response_id``, names the previous answer, whose server keeps the history).

A turn's intended time is the end of the previous answer plus the think time, so a slow
server delays the conversation (as it would a person) while the client's own lag still
shows. A failed turn ends its conversation; no new turn starts after the phase ends.
"""

from __future__ import annotations

from dataclasses import replace

from surgelab.load.identity import meta_for
from surgelab.load.phases import PhasePlan
from surgelab.metrics.record import State
from surgelab.runner.execution import LEAD_NS, Execution
from surgelab.units import SECOND

__all__ = ["converse"]


async def converse(ex: Execution, plan: PhasePlan, index: int, intended: int, user: int = -1, sampler=None) -> None:
    """Run request ``index`` and, if its class has sessions, the turns that follow it.

    ``sampler`` replaces the phase's mix for a user who keeps one profile.
    """
    sampler = sampler or plan.sampler
    first = sampler.spec(index)
    conversation = sampler.conversation(index)
    if conversation is None:
        await ex.execute(meta_for(plan, index, first, intended, user), first)
        return
    spec, history, previous = first, (), None
    for turn in range(1, conversation.turns + 1):
        if turn > 1:
            intended = ex.clock() + int(conversation.think_s[turn - 2] * SECOND)
            if intended >= plan.end_ns or not await ex.sleep_until(intended - LEAD_NS):
                return
            spec = sampler.next_turn(index, first, conversation, turn, history)
            if conversation.previous_response_id:
                spec = replace(spec, previous_response_id=previous)
        out = await ex.execute(meta_for(plan, index, spec, intended, user, turn), spec)
        if out.state is not State.OK:
            return
        history, previous = (*history, (spec.prompt, out.text or "")), out.response_id
