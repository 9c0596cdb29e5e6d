"""Tool rounds and agentic tasks in a measured run.

``answer_tools`` sends a request and, while its answer calls tools (and rounds are left), waits the
tools' latency and sends their results: the session's turn or the task's step goes on. ``run_task``
runs one task's DAG: every node waits for its parents, thinks, then sends on the shared context (a
recorded tool call only waits); parallel nodes are in flight together. A failed request ends its
branch: nothing after it is sent.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from surgelab.load.phases import PhasePlan
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordMeta
from surgelab.runner.execution import LEAD_NS, Execution
from surgelab.scenario.agents import MAX_TASK_REQUESTS
from surgelab.units import SECOND
from surgelab.workload.agents import TaskPlan, history_of, step_spec
from surgelab.workload.request import RequestSpec
from surgelab.workload.tools import added_history, follow_up, tool_latency_s

__all__ = ["answer_tools", "run_task", "Answered", "Meta"]

Answered = tuple[Outcome, RequestSpec, int, bool]
"""The last request's outcome, its spec (with the tool rounds in its history), the requests made, and
whether the turn or step is done (False: failed, or its tool results could not be sent before the phase's end)."""


async def answer_tools(
    ex: Execution,
    meta: Any,
    factory: Any,
    spec: RequestSpec,
    intended: int,
    turn: int,
    rounds: int,
    server_state: bool = False,
) -> Answered:
    """Send ``spec`` as turn ``turn``, then up to ``rounds`` tool rounds; ``meta(spec, intended, turn)`` names each.

    ``server_state``: a follow-up names the calling answer (``previous_response_id``) instead of resending.
    """
    made = 0
    while True:
        out = await ex.execute(meta(spec, intended, turn + made), spec)
        made += 1
        if out.state is not State.OK or not out.calls or made > rounds or turn + made > MAX_TASK_REQUESTS:
            return out, spec, made, out.state is State.OK
        seed = turn + made
        intended = ex.clock() + int(tool_latency_s(factory.cls.tools, [*factory.key, meta.index], seed) * SECOND)
        if intended >= meta.plan.end_ns or not await ex.sleep_until(intended - LEAD_NS):
            return out, spec, made, False
        spec = follow_up(factory, spec, out.calls, meta.index * MAX_TASK_REQUESTS + seed)
        if server_state:
            spec = replace(spec, previous_response_id=out.response_id)


class Meta:
    """The record names of one task's or session's requests (``runner.conversation.meta_for``)."""

    def __init__(self, make: Any, plan: PhasePlan, index: int, user: int) -> None:
        self.make, self.plan, self.index, self.user = make, plan, index, user

    def __call__(self, spec: RequestSpec, intended: int, turn: int) -> RecordMeta:
        return self.make(self.plan, self.index, spec, intended, self.user, turn)


async def run_task(ex: Execution, meta: Meta, factory: Any, first: RequestSpec, task: TaskPlan, intended: int) -> None:
    """The task's DAG: each node once its parents are done (none when one failed)."""
    answers: dict[int, tuple[tuple[str, str], ...]] = {}
    runs: list[asyncio.Task] = []

    async def node_run(node: Any) -> bool:
        if not all(await asyncio.gather(*(runs[p] for p in node.parents))):
            return False
        think = int(task.think_s[node.number] * SECOND)
        at = (ex.clock() if node.parents else intended) + think
        lead = LEAD_NS if node.sends else 0  # a request is prepared early; a wait ends on time
        if (node.parents or think) and (at >= meta.plan.end_ns or not await ex.sleep_until(at - lead)):
            return False
        if not node.sends:  # a recorded tool call: its time is waited, nothing is sent
            answers[node.number] = ()
            return True
        spec = step_spec(factory, meta.index, first, task, node, history_of(task, node, answers))
        out, last, _, done = await answer_tools(ex, meta, factory, spec, at, node.turn, node.rounds)
        if not done:
            return False
        answers[node.number] = added_history(spec, last, out.text or "")
        return True

    for node in task.nodes:
        runs.append(asyncio.ensure_future(node_run(node)))
    try:
        await asyncio.gather(*runs)
    finally:
        for run in runs:
            run.cancel()
