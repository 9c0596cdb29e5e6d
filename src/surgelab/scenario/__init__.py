"""The scenario file: pydantic schema, YAML loading with file:line errors, CLI overrides."""

from surgelab.scenario.loader import ScenarioError, load_scenario
from surgelab.scenario.model import Scenario

__all__ = ["Scenario", "ScenarioError", "load_scenario"]
