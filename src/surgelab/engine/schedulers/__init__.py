"""The engine's scheduling policies, one per module, chosen by name (``Engine(profile, scheduler=...)``).

``base.Scheduler`` is what a policy answers: the order requests wait in and whom to preempt
when the KV cache runs out; the engine does the rest (docs/architecture.md: adding a scheduler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from surgelab.engine.schedulers.base import Scheduler, Sequenced
from surgelab.engine.schedulers.fcfs import FCFS

__all__ = ["SCHEDULERS", "Scheduler", "Sequenced", "make_scheduler"]

SCHEDULERS: dict[str, Callable[[], Scheduler[Any]]] = {"fcfs": FCFS}
"""Policies by name; each call makes a fresh one (it holds an engine's waiting queue)."""


def make_scheduler(scheduler: Scheduler[Any] | str) -> Scheduler[Any]:
    """The policy named (or the one given, as it is)."""
    if not isinstance(scheduler, str):
        return scheduler
    make = SCHEDULERS.get(scheduler)
    if make is None:
        raise ValueError(f"unknown scheduler {scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    return make()
