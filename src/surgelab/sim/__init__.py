"""Discrete-event simulation of a serving fleet on the scenario's own schedule.

``simulate(scenario, fleet, run_dir)`` steps the engine model of every replica in virtual
time behind a router, an admission queue, a response cache and per-pool autoscalers, and
writes the same run directory a measured run does (plus the fleet timeline and cost).
"""

from surgelab.sim.autoscaler import Hpa
from surgelab.sim.fleet import Fleet
from surgelab.sim.loader import FleetError, build_fleet, fleet_error_bar, load_fleet
from surgelab.sim.run import SimResult, comparison_rows, simulate

__all__ = ["Fleet", "FleetError", "Hpa", "SimResult", "build_fleet", "comparison_rows", "fleet_error_bar", "load_fleet", "simulate"]
