"""Agentic tasks: the plan of one task (its DAG's nodes and their draws) and each step's request.

A step's prompt is the task's shared context: the system prompt, the task's opening prompt and
every ancestor's exchange (its instruction, tool rounds and answer) in node order, then the
step's own instruction. Parallel steps share all but their instruction, a merge step holds
every branch: the prefix reuse of a real agent's contexts. The runner and the simulator
both build their requests here, so a simulated task asks what a measured one asks.

A replayed task (``agent.replay``) is one recorded trace: each model call asks for its recorded
prompt and output lengths, its prompt opening with its own agent's earlier exchanges (as many
as fit); a recorded tool call sends nothing, it is time waited.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from surgelab.scenario.agents import Agent, Node, recorded_nodes
from surgelab.workload.request import RequestSpec

__all__ = ["TaskPlan", "plan_task", "step_spec", "history_of", "factory_of"]


@dataclass(frozen=True)
class TaskPlan:
    nodes: list[Node]
    think_s: tuple[float, ...]  # pause before each node once its parents have ended (a root: from the task's start);
    # a recorded tool call's holds its latency too
    prompt_tokens: tuple[int, ...]  # each node's instruction (a recorded call: its whole prompt)
    output_tokens: tuple[int, ...]


def factory_of(sampler: Any, index: int) -> Any:
    """The ``PromptFactory`` of request ``index``: a mix's class, or the user's own profile."""
    return sampler.factory(index) if hasattr(sampler, "factory") else sampler


def plan_task(factory: Any, index: int) -> TaskPlan | None:
    """How the task started by request ``index`` goes (None when its class is no agent)."""
    agent = getattr(factory.cls, "agent", None)
    if agent is None:
        return None
    rng = np.random.default_rng([*factory.key, 13, index])
    if agent.replay is not None:
        return _replayed(agent, index, rng)
    tools = factory.cls.tools
    nodes = agent.nodes(tools.max_rounds if tools else 0)
    n = len(nodes)
    think = agent.think.sample(rng, n)
    prompts = [max(int(np.rint(node.step.prompt_tokens.sample(rng, 1)[0])), 1) for node in nodes]
    outputs = [max(int(np.rint(node.step.output_tokens.sample(rng, 1)[0])), 1) for node in nodes]
    return TaskPlan(nodes, tuple(0.0 if not node.parents else float(t) for node, t in zip(nodes, think, strict=True)),
                    tuple(prompts), tuple(outputs))  # fmt: skip


def _replayed(agent: Agent, index: int, rng: np.random.Generator) -> TaskPlan:
    """Task ``index``'s trace: recorded lengths, and its think and tool times as recorded (÷ speed) or drawn."""
    calls = agent.trace_of(index).calls
    n = len(calls)

    def waits(how: Any, recorded: list[float]) -> np.ndarray:
        return np.array(recorded) / agent.speed if how == "recorded" else np.maximum(how.sample(rng, n), 0.0)

    think = waits(agent.think, [c.think_s for c in calls])
    if agent.think != "recorded":
        think[[not c.parents for c in calls]] = 0.0  # as in a DAG of steps: roots start with the task
    tools = waits(agent.tool_time, [c.duration_s for c in calls])
    think_s = tuple(float(t) if c.model else float(t + w) for c, t, w in zip(calls, think, tools, strict=True))
    return TaskPlan(recorded_nodes(agent.trace_of(index)), think_s, tuple(c.input_tokens for c in calls),
                    tuple(max(c.output_tokens, 1) for c in calls))  # fmt: skip


def history_of(plan: TaskPlan, node: Node, answers: dict[int, tuple[tuple[str, str], ...]]) -> tuple[tuple[str, str], ...]:
    """The exchanges ``node``'s prompt opens with: its ancestors' (a replayed call: its context's), in node order."""
    opening = node.ancestors(plan.nodes) if node.context is None else node.context
    return tuple(pair for k in opening for pair in answers[k])


def step_spec(
    factory: Any, index: int, first: RequestSpec, plan: TaskPlan, node: Node, history: tuple[tuple[str, str], ...]
) -> RequestSpec:
    """Node ``node``'s request: ``history`` (its ancestors' exchanges) and its instruction; a root starts with
    the task's opening prompt (``first``, the class's own request)."""
    n = plan.prompt_tokens[node.number]
    if node.context is not None:
        return _recorded_spec(factory, index, first, plan, node, history)
    instruction = factory.text(index + (1 + node.turn) * 1_000_003, n)
    if node.parents:
        prompt, tokens = instruction, factory.context_tokens(n, history)
    else:
        prompt, tokens = f"{first.prompt} {instruction}", first.prompt_tokens + n
    tools = tuple(factory.cls.tools.names) if node.step.tools else ()
    return replace(first, prompt=prompt, prompt_tokens=tokens, max_tokens=plan.output_tokens[node.number], history=history,
                   tools=tools, step=node.step.name, keep_text=True)  # fmt: skip


def _recorded_spec(
    factory: Any, index: int, first: RequestSpec, plan: TaskPlan, node: Node, history: tuple[tuple[str, str], ...]
) -> RequestSpec:
    """A recorded call's request: its recorded prompt length, opening with as much of ``history`` as fits."""
    want = plan.prompt_tokens[node.number]
    lo, hi = 0, len(history)  # the longest head of the history that leaves a token for the instruction
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if factory.context_tokens(1, history[:mid]) <= want else (lo, mid - 1)
    history = history[:lo]
    n = max(want - factory.context_tokens(0, history), 1)
    return replace(first, prompt=factory.text(index + (1 + node.turn) * 1_000_003, n),
                   prompt_tokens=factory.context_tokens(n, history), max_tokens=plan.output_tokens[node.number],
                   history=history, tools=(), step=node.step.name, keep_text=True)  # fmt: skip
