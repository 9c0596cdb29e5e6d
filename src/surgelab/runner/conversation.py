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
from surgelab.runner.agents import Meta, answer_tools, run_task
from surgelab.runner.execution import LEAD_NS, Execution
from surgelab.units import SECOND
from surgelab.workload.agents import factory_of, plan_task
from surgelab.workload.prompts import MAX_TURNS
from surgelab.workload.tools import added_history

__all__ = ["converse"]


async def converse(ex: Execution, plan: PhasePlan, index: int, intended: int, user: int = -1, sampler=None) -> None:
    """Run request ``index`` and, if its class has sessions, the turns that follow it.

    ``sampler`` replaces the phase's mix for a user who keeps one profile.
    """
    sampler = sampler or plan.sampler
    first = sampler.spec(index)
    factory, meta = factory_of(sampler, index), Meta(meta_for, plan, index, user)
    task = plan_task(factory, index)
    if task is not None:
        await run_task(ex, meta, factory, first, task, intended)
        return
    conversation = sampler.conversation(index)
    rounds = factory.cls.tools.max_rounds if first.tools else 0
    if conversation is None:
        await answer_tools(ex, meta, factory, first, intended, 1 if rounds else 0, rounds)  # its tool rounds: a session
        return
    spec, previous, number = first, None, 1
    history: tuple[tuple[str, str], ...] = ()  # (role, text) of the turns so far
    for turn in range(1, conversation.turns + 1):
        if turn > 1:
            intended = ex.clock() + int(conversation.think_s[turn - 2] * SECOND)
            if intended >= plan.end_ns or number > MAX_TURNS or not await ex.sleep_until(intended - LEAD_NS):
                return
            spec = sampler.next_turn(index, first, conversation, turn, history)
            if conversation.previous_response_id:
                spec = replace(spec, previous_response_id=previous)
        out, last, made, done = await answer_tools(ex, meta, factory, spec, intended, number, rounds,
                                                   conversation.previous_response_id)  # fmt: skip
        if not done:
            return
        number += made
        history, previous = (*history, *added_history(spec, last, out.text or "")), out.response_id
