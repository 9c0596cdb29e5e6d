"""Execution: open and closed loops on one event loop, guards and stopping; where the load is sent
from (this process, workers, Ray, compare) behind one interface (``backends``); the protocols it
calls (``protocols``)."""

from surgelab.runner.run import RunResult, run_scenario

__all__ = ["RunResult", "run_scenario"]
