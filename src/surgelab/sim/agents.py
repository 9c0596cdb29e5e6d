"""Tool rounds and agentic tasks in virtual time: the requests a measured run sends, with their dependencies.

A simulated model answers a request that offers tools with a call of the first tool (as
``surgelab serve`` does) and the request that brings the result with text; the result is sent
the tool's latency after the call ended. A task's node is sent once its last parent ended and
its think time passed (a recorded tool call only waits); a failed request ends its branch. Ids, steps and prompts are the
runner's (``runner.agents``, ``workload.agents``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from surgelab.load.identity import meta_row
from surgelab.metrics.record import State
from surgelab.scenario.agents import MAX_TASK_REQUESTS, Node
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.request import SECOND, SimOutcome, SimRequest
from surgelab.workload.agents import TaskPlan, history_of, step_spec
from surgelab.workload.request import RequestSpec
from surgelab.workload.tools import added_history, follow_up, stand_in_calls, tool_latency_s

__all__ = ["SimTask", "tool_round", "offer_tools"]


class ToolSimOutcome(SimOutcome):
    """The outcome of a request that offers tools: its tool-call columns, as the runner records them."""

    __slots__ = ("_names", "_args_bytes")

    def __init__(self, sent_ns: int | None, names: str | None, args_bytes: int) -> None:
        super().__init__(sent_ns)
        self._names, self._args_bytes = names, args_bytes

    @property
    def tool_calls(self) -> int | None:
        return None if self.state is not State.OK else int(self._names is not None)

    @property
    def tool_names(self) -> str | None:
        return self._names if self.state is State.OK else None

    @property
    def tool_args_bytes(self) -> int | None:
        return self._args_bytes if self.state is State.OK else None

    @property
    def first_tool_ns(self) -> int | None:
        return self.first_token_ns if self.state is State.OK and self._names is not None else None


def offer_tools(req: SimRequest, answer: str) -> SimRequest:
    """``req`` with an outcome that records its tool call (``answer``'s words as the query) or its text answer."""
    spec = req.spec
    if spec.tools:
        calls = None if spec.tool_results else stand_in_calls(spec, answer)
        names = None if calls is None else calls[0].name
        req.outcome = ToolSimOutcome(
            req.outcome.sent_ns, names, 0 if calls is None else len(calls[0].arguments.encode())
        )
    return req


def tool_round(
    factory: Any, index: int, req: SimRequest, turn: int, made: int, rounds: int, answer: str
) -> tuple[RequestSpec, int] | None:
    """The follow-up of ``req`` (its ``made``-th request of a turn or step) and when it is due, when its answer
    called a tool and a round is left; None otherwise."""
    spec = req.spec
    if not spec.tools or spec.tool_results or made > rounds or turn + made > MAX_TASK_REQUESTS:
        return None
    end = req.outcome.end_ns
    assert end is not None
    seed = turn + made
    due = end + int(tool_latency_s(factory.cls.tools, [*factory.key, index], seed) * SECOND)
    return follow_up(factory, spec, stand_in_calls(spec, answer), index * MAX_TASK_REQUESTS + seed), due


class SimTask:
    """One task's DAG: nodes sent as their parents end; ``finish`` is called once nothing is left to send."""

    def __init__(self, traffic: Any, ctx: Any, factory: Any, first: RequestSpec, plan: TaskPlan, finish: Any) -> None:
        self.traffic, self.ctx, self.factory, self.first, self.plan, self.finish = (
            traffic,
            ctx,
            factory,
            first,
            plan,
            finish,
        )
        self.waiting = [len(node.parents) for node in plan.nodes]
        self.answers: dict[int, tuple[tuple[str, str], ...]] = {}
        self.children: list[list[int]] = [[] for _ in plan.nodes]
        for node in plan.nodes:
            for parent in node.parents:
                self.children[parent].append(node.number)
        self.open = 0  # requests in flight or due
        self.started: dict[int, RequestSpec] = {}  # each node's first request

    def start(self, sim: Any, intended: int) -> list[Event]:
        events: list[Event] = []
        for node in (node for node in self.plan.nodes if not node.parents):
            think = int(self.plan.think_s[node.number] * SECOND)
            events.extend(self._node(sim, node, intended) if not think else self._later(sim, node, intended + think))
        if self.open == 0:
            events.extend(self.finish(sim, self.ctx, intended))
        return events

    def _later(self, sim: Any, node: Node, due: int) -> list[Event]:
        """``node`` once ``due`` (nothing when the phase has ended by then)."""
        if due >= self.ctx.source.plan.end_ns:
            return []
        self.open += 1
        return [Call(max(due, sim.now), Rank.ARRIVAL, self._due, node, None, due, 0)]

    def _node(self, sim: Any, node: Node, intended: int) -> Iterable[Event]:
        if not node.sends:  # a recorded tool call: its time (think_s) has passed, nothing is sent
            self.answers[node.number] = ()
            return self._ended(sim, node, intended)
        spec = step_spec(self.factory, self.ctx.index, self.first, self.plan, node,
                         history_of(self.plan, node, self.answers))  # fmt: skip
        self.started[node.number] = spec
        return self._send(sim, node, spec, intended, 0)

    def _send(self, sim: Any, node: Node, spec: RequestSpec, intended: int, made: int) -> Iterable[Event]:
        ctx = self.ctx
        meta = meta_row(ctx.source.plan, ctx.index, spec, intended, ctx.user, node.turn + made)
        self.open += 1
        t = self.traffic
        req = SimRequest(
            str(meta.id), meta, spec, spec.max_tokens, t.first_token_ns, t.total_ns, (self, node, made + 1), intended
        )
        return sim.send(
            offer_tools(req, t.answer_of(self.ctx, node.turn + made, spec.max_tokens) if spec.tools else "")
        )

    def _due(self, sim: Any, node: Node, spec: RequestSpec | None, intended: int, made: int) -> Iterable[Event]:
        self.open -= 1
        events = list(
            self._send(sim, node, spec, intended, made) if spec is not None else self._node(sim, node, intended)
        )
        if self.open == 0:  # a recorded tool call that ended the task
            events.extend(self.finish(sim, self.ctx, intended))
        return events

    def _ended(self, sim: Any, node: Node, end: int) -> list[Event]:
        """``node`` ended at ``end``: each child whose parents have all ended is due after its think time."""
        events: list[Event] = []
        for child in self.children[node.number]:
            self.waiting[child] -= 1
            if self.waiting[child] == 0:
                events.extend(self._later(sim, self.plan.nodes[child], end + int(self.plan.think_s[child] * SECOND)))
        return events

    def done(self, sim: Any, req: SimRequest) -> Iterable[Event]:
        _, node, made = req.context
        self.open -= 1
        events: list[Event] = []
        end = req.outcome.end_ns
        assert end is not None
        stop = self.ctx.source.plan.end_ns
        if req.outcome.state is State.OK:
            answer = self.traffic.answer_of(self.ctx, node.turn + made, req.tokens)
            follow = tool_round(self.factory, self.ctx.index, req, node.turn, made, node.rounds, answer)
            if follow is not None:
                if follow[1] < stop:
                    self.open += 1
                    events.append(
                        Call(max(follow[1], sim.now), Rank.ARRIVAL, self._due, node, follow[0], follow[1], made)
                    )
            else:
                self.answers[node.number] = added_history(self.started[node.number], req.spec, answer)
                events.extend(self._ended(sim, node, end))
        if self.open == 0:
            events.extend(self.finish(sim, self.ctx, end))
        return events
