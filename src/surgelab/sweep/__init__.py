"""Stepped load tests: levels held in turn, stop rules, knee, SLA capacity, breaking phase."""

from surgelab.sweep.config import BreakConfig, StopRules, SweepConfig
from surgelab.sweep.result import LevelRow, SweepFileError, SweepResult, read_sweep
from surgelab.sweep.runner import SweepError, run_sweep

__all__ = [
    "BreakConfig", "LevelRow", "StopRules", "SweepConfig", "SweepError", "SweepFileError", "SweepResult", "read_sweep",
    "run_sweep",
]  # fmt: skip
