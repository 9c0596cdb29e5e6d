"""The scenario's traffic in virtual time: the very schedule and requests a real run sends.

Open loop: ``open_loop_offsets`` of each phase, each arrival fires at its intended time;
one beyond the phase's ``max_in_flight`` is recorded as dropped. Dealt to ``users``: arrival
``i`` belongs to user ``i mod users`` and waits for that user's previous answer (its intended
time is when it can go); one still waiting when the phase ends is dropped. Closed loop: each user
sends when ready, waits for the whole answer, thinks (the same seeded draws as the runner's
users) and sends again until the phase ends; shaped concurrency activates users below the
level. Sessions: each turn follows the previous answer after its think time, with the
history resent. Ids, phases, classes, tiers and warm-up flags are those of a real run
(``surgelab.load.identity.meta_row``); the simulated client never lags, so
``sent_ns == intended_ns``.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from surgelab.load.identity import meta_row
from surgelab.load.phases import PhasePlan, open_loop_offsets, plan_phases
from surgelab.metrics.record import State
from surgelab.scenario.model import Scenario
from surgelab.sim.agents import SimTask, offer_tools, tool_round
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.request import SECOND, SimOutcome, SimRequest
from surgelab.workload.agents import factory_of, plan_task
from surgelab.workload.tools import added_history

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["Traffic"]

_NAP_NS = SECOND // 10  # an inactive closed-loop user looks at the level again this often (runner's MAX_NAP_S)


@dataclass(slots=True)
class _Context:
    source: _Source
    index: int
    user: int
    turn: int
    sampler: Any
    first: Any = None
    conversation: Any = None
    history: tuple = ()
    dealt: bool = False
    """An open-loop request dealt to ``user``: the user's next waiting request follows its answer."""
    extra: int = 0  # tool rounds sent so far (each a request of its own: record turns are turn + extra)
    round: int = 0  # tool rounds of the turn under way
    turn_spec: Any = None  # the turn's first request, before its tool rounds


class _Source:
    def __init__(self, scenario: Scenario, plan: PhasePlan) -> None:
        self.plan, self.load = plan, plan.phase.load
        self.in_flight = 0
        self.issue = itertools.count()
        offsets = open_loop_offsets(scenario, plan.index) + plan.start_ns if self.load.mode == "open" else None
        self.offsets: list[int] | None = None if offsets is None else offsets.tolist()  # Python ints: read one by one
        self.users = self.load.users or 0
        self.waiting: dict[int, deque[int]] = {}
        """Dealt to users: the requests each busy user has yet to send (a user is busy while it has an entry)."""


class Traffic:
    def __init__(self, scenario: Scenario, texts: bool = True, synthetic: bool = False) -> None:
        self.scenario = scenario
        self.texts = texts  # prompt texts are built (False: only their lengths count, ``PromptFactory.spec``)
        self.synthetic = synthetic  # how a prompt is made counts too: its text is built where that is not known
        self.plans = plan_phases(scenario)
        self.sources = [_Source(scenario, p) for p in self.plans]
        t = scenario.target.timeouts
        self.first_token_ns, self.total_ns = round(t.first_token * SECOND), round(t.total * SECOND)
        self.open_conversations = 0
        self.stopped = False  # a stop rule held: nothing more is sent
        self.end_ns = max(p.end_ns for p in self.plans)
        self.agents = any(c.agent for p in scenario.phase_list for c in scenario.workload_of(p).classes)

    def planned_peak(self, start_s: float, end_s: float) -> float:
        """Highest request rate the open-loop phases plan between two run times (the forecast)."""
        times = np.arange(start_s, end_s + 1.0, 1.0)
        total = np.zeros(times.size)
        for src in self.sources:
            if src.load.mode != "open":
                continue
            plan = src.plan
            t = times - plan.start_ns / SECOND
            inside = (t >= 0) & (t < (plan.end_ns - plan.start_ns) / SECOND)
            total += np.where(inside, src.load.shape.level(np.clip(t, 0, None)), 0.0)
        return float(total.max()) if total.size else 0.0

    def start(self, sim: Simulator) -> list[Event]:
        events: list[Event] = []
        sampler: Any  # the phase's sampler, or a user's own profile of it
        for src in self.sources:
            if src.offsets is not None:
                if len(src.offsets):
                    events.append(Call(src.offsets[0], Rank.ARRIVAL, self._open_arrival, src, 0))
                continue
            users = math.ceil(src.load.shape.peak)
            for user in range(users):
                rng = np.random.default_rng([self.scenario.seed, 20, src.plan.index, user])
                sampler, think = src.plan.sampler, src.load.think_time
                if self.scenario.workload_of(src.plan.phase).assign == "user" and hasattr(sampler, "profile"):
                    sampler = sampler.profile([self.scenario.seed, 21, src.plan.index, user])
                    think = sampler.cls.think_time or think
                state = (rng, sampler, think)
                ready = src.plan.user_ready_ns(user, users)
                events.append(Call(ready, Rank.ARRIVAL, self._user_ready, src, user, state))
        return events

    @property
    def active(self) -> bool:
        return self.open_conversations > 0

    # -- arrivals ---------------------------------------------------------------------------

    def _open_arrival(self, sim: Simulator, src: _Source, i: int) -> Iterable[Event]:
        if self.stopped:
            return ()
        offsets = src.offsets
        assert offsets is not None
        events: list[Event] = []
        if i + 1 < len(offsets):
            events.append(Call(offsets[i + 1], Rank.ARRIVAL, self._open_arrival, src, i + 1))
        plan, intended = src.plan, sim.now
        if src.users:
            user = i % src.users
            if user in src.waiting:
                src.waiting[user].append(i)  # the user sends it once its answer is back
                return events
        if src.in_flight >= src.load.max_in_flight:
            meta = meta_row(plan, i, plan.sampler.spec(i, self.texts), intended, -1)
            sim.record(meta, SimOutcome(None, State.DROPPED, f"max_in_flight ({src.load.max_in_flight}) reached"))
            return events
        src.in_flight += 1
        self.open_conversations += 1
        if src.users:
            src.waiting[i % src.users] = deque()
            ctx = _Context(src, i, i % src.users, 0, plan.sampler, dealt=True)
        else:
            ctx = _Context(src, i, -1, 0, plan.sampler)
        events.extend(self._turn(sim, ctx, intended))
        return events

    def _user_next(self, sim: Simulator, src: _Source, user: int) -> Iterable[Event]:
        """A dealt user's answer is back: it sends its next waiting request now (dropped after the phase or a stop)."""
        queue = src.waiting[user]
        plan = src.plan
        if queue and sim.now < plan.end_ns and not self.stopped:
            i = queue.popleft()
            self.open_conversations += 1
            return self._turn(sim, _Context(src, i, user, 0, plan.sampler, dealt=True), sim.now)
        for i in queue:
            meta = meta_row(plan, i, plan.sampler.spec(i, self.texts), sim.now, user)
            sim.record(meta, SimOutcome(None, State.DROPPED, "its user was still waiting for an answer when the phase ended"))
        del src.waiting[user]
        src.in_flight -= 1
        return ()

    def _user_ready(self, sim: Simulator, src: _Source, user: int, state: tuple) -> Iterable[Event]:
        plan = src.plan
        if sim.now >= plan.end_ns or self.stopped:
            return ()
        if not plan.user_active(user, sim.now):
            return [Call(sim.now + _NAP_NS, Rank.ARRIVAL, self._user_ready, src, user, state)]
        self.open_conversations += 1
        ctx = _Context(src, next(src.issue), user, 0, state[1])
        ctx.conversation = state  # the user's own draws ride along; replaced below for sessions
        return self._turn(sim, ctx, sim.now)

    def _turn(self, sim: Simulator, ctx: _Context, intended: int) -> Iterable[Event]:
        sampler = ctx.sampler
        made = None
        if ctx.turn == 0:
            user_state = ctx.conversation
            made = sampler.synthetic(ctx.index) if self.synthetic else None
            ctx.first = spec = sampler.spec(ctx.index, self.texts or (self.synthetic and made is None))
            ctx.conversation = (sampler.conversation(ctx.index), user_state)
            task = plan_task(factory_of(sampler, ctx.index), ctx.index) if self.agents else None
            if task is not None:
                return SimTask(self, ctx, factory_of(sampler, ctx.index), spec, task, self._finished).start(sim, intended)
            if ctx.conversation[0] is not None or spec.tools:  # a request's tool rounds make a session too
                ctx.turn = 1
        else:
            conv = ctx.conversation[0]
            spec = sampler.next_turn(ctx.index, ctx.first, conv, ctx.turn, ctx.history)
        return self._send(sim, ctx, spec, intended, made)

    def _send(self, sim: Simulator, ctx: _Context, spec: Any, intended: int, made: Any = None) -> Iterable[Event]:
        plan = ctx.source.plan
        if ctx.round == 0:
            ctx.turn_spec = spec
        meta = meta_row(plan, ctx.index, spec, intended, ctx.user, ctx.turn + ctx.extra)
        out_tokens = spec.max_tokens
        req = SimRequest(str(meta.id), meta, spec, out_tokens, self.first_token_ns, self.total_ns, ctx, intended, made)
        if spec.tools:
            offer_tools(req, self.answer_of(ctx, ctx.turn + ctx.extra, out_tokens))
        return sim.send(req)

    def done(self, sim: Simulator, req: SimRequest) -> Iterable[Event]:
        """A request ended: carry its conversation on, or let its user think and send again."""
        if isinstance(req.context, tuple):  # a step of an agentic task
            return req.context[0].done(sim, req)
        ctx: _Context = req.context
        plan, end = ctx.source.plan, req.outcome.end_ns
        assert end is not None  # the request has ended
        conv = ctx.conversation[0]
        ok = req.outcome.state is State.OK
        if ok and req.spec.tools:
            answer = _answer(ctx.sampler, ctx.index, ctx.turn + ctx.extra, req.tokens)
            factory = factory_of(ctx.sampler, ctx.index)
            turn = ctx.turn + ctx.extra - ctx.round
            follow = tool_round(factory, ctx.index, req, turn, ctx.round + 1, factory.cls.tools.max_rounds, answer)
            if follow is not None:
                if follow[1] >= plan.end_ns:
                    return self._finished(sim, ctx, end)
                ctx.round, ctx.extra = ctx.round + 1, ctx.extra + 1
                return [Call(max(follow[1], sim.now), Rank.ARRIVAL, self._send, ctx, follow[0], follow[1])]
        if conv is not None and ok and ctx.turn < conv.turns:
            intended = end + int(conv.think_s[ctx.turn - 1] * SECOND)
            if intended < plan.end_ns:
                answer = _answer(ctx.sampler, ctx.index, ctx.turn + ctx.extra, req.tokens)
                ctx.history = (*ctx.history, *added_history(ctx.turn_spec, req.spec, answer))
                ctx.turn += 1
                ctx.round = 0
                return [Call(max(intended, sim.now), Rank.ARRIVAL, self._next_turn, ctx, intended)]
        return self._finished(sim, ctx, end)

    def answer_of(self, ctx: _Context, turn: int, tokens: int) -> str:
        """The stand-in answer of a request of ``ctx``'s conversation or task."""
        return _answer(ctx.sampler, ctx.index, turn, tokens)

    def _finished(self, sim: Simulator, ctx: _Context, end: int) -> Iterable[Event]:
        """A conversation (or task) is over: its user sends its next request, or thinks and sends again."""
        src = ctx.source
        user_state = ctx.conversation[1]
        self.open_conversations -= 1
        if ctx.dealt:
            return self._user_next(sim, src, ctx.user)
        if ctx.user < 0:
            src.in_flight -= 1
            return ()
        rng, _, think = user_state
        ready = end + int(float(think.sample(rng, 1)[0]) * SECOND)
        return [Call(max(ready, sim.now), Rank.ARRIVAL, self._user_ready, src, ctx.user, user_state)]

    def _next_turn(self, sim: Simulator, ctx: _Context, intended: int) -> Iterable[Event]:
        return () if self.stopped else self._turn(sim, ctx, intended)


def _answer(sampler: Any, index: int, turn: int, tokens: int) -> str:
    """Stand-in text of the answer's length for the session history (the model's words do not matter)."""
    factory = factory_of(sampler, index)
    return factory.text(index + 7_919 * turn, max(tokens, 1)) if hasattr(factory, "text") else ""
