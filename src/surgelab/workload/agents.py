"""Agentic tasks: the plan of one task (its DAG's nodes and their draws) and each step's request.

A step's prompt is the task's shared context: the system prompt, the task's opening prompt and
every ancestor's exchange (its instruction, tool rounds and answer) in node order, then the
step's own instruction. Parallel steps share all but their instruction, a merge step holds
every branch: the prefix reuse of a real agent's contexts. The runner and the simulator
both build their requests here, so a simulated task asks what a measured one asks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from surgelab.scenario.agents import Node
from surgelab.workload.request import RequestSpec

__all__ = ["TaskPlan", "plan_task", "step_spec", "factory_of"]


@dataclass(frozen=True)
class TaskPlan:
    nodes: list[Node]
    think_s: tuple[float, ...]  # pause before each node, once its parents have ended (roots: none)
    prompt_tokens: tuple[int, ...]  # each node's instruction
    output_tokens: tuple[int, ...]


def factory_of(sampler: Any, index: int) -> Any:
    """The ``PromptFactory`` of request ``index``: a mix's class, or the user's own profile."""
    return sampler.factory(index) if hasattr(sampler, "factory") else sampler


def plan_task(factory: Any, index: int) -> TaskPlan | None:
    """How the task started by request ``index`` goes (None when its class is no agent)."""
    agent = getattr(factory.cls, "agent", None)
    if agent is None:
        return None
    tools = factory.cls.tools
    nodes = agent.nodes(tools.max_rounds if tools else 0)
    rng = np.random.default_rng([*factory.key, 13, index])
    n = len(nodes)
    think = agent.think_time.sample(rng, n)
    prompts = [max(int(np.rint(node.step.prompt_tokens.sample(rng, 1)[0])), 1) for node in nodes]
    outputs = [max(int(np.rint(node.step.output_tokens.sample(rng, 1)[0])), 1) for node in nodes]
    return TaskPlan(nodes, tuple(0.0 if not node.parents else float(t) for node, t in zip(nodes, think, strict=True)),
                    tuple(prompts), tuple(outputs))  # fmt: skip


def step_spec(
    factory: Any, index: int, first: RequestSpec, plan: TaskPlan, node: Node, history: tuple[tuple[str, str], ...]
) -> RequestSpec:
    """Node ``node``'s request: ``history`` (its ancestors' exchanges) and its instruction; a root starts with
    the task's opening prompt (``first``, the class's own request)."""
    n = plan.prompt_tokens[node.number]
    instruction = factory.text(index + (1 + node.turn) * 1_000_003, n)
    if node.parents:
        prompt, tokens = instruction, factory.context_tokens(n, history)
    else:
        prompt, tokens = f"{first.prompt} {instruction}", first.prompt_tokens + n
    tools = tuple(factory.cls.tools.names) if node.step.tools else ()
    return replace(first, prompt=prompt, prompt_tokens=tokens, max_tokens=plan.output_tokens[node.number], history=history,
                   tools=tools, step=node.step.name, keep_text=True)  # fmt: skip
