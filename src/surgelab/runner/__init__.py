"""Execution: open and closed loops on one event loop, records, live counters, stopping."""

from surgelab.runner.run import RunResult, run_scenario

__all__ = ["RunResult", "run_scenario"]
