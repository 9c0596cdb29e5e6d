"""The schedule of a run: each phase's start, end, request ids and mix, and its open-loop send times.

Computed from the scenario and its seed without sending anything, so the runner, the simulator
and the preview share it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from surgelab.load.arrivals import SeededArrivals
from surgelab.scenario.model import Phase, Scenario
from surgelab.units import SECOND
from surgelab.workload.prompts import WorkloadSampler
from surgelab.workload.tokenizers import load_tokenizer
from surgelab.workload.trace_workload import TraceSampler

__all__ = ["PhasePlan", "plan_phases", "open_loop_offsets", "ID_STRIDE", "TURN_SHIFT"]

ID_STRIDE = 1 << 40  # request ids of phase k are k·2⁴⁰ + i: unique across phases, stable per seed
TURN_SHIFT = 32  # turn k of session i has id base + ((k - 1) << 32) + i: turn 1 keeps the plain id


@dataclass
class PhasePlan:
    phase: Phase
    index: int
    start_ns: int  # on the run clock, jitter included
    end_ns: int
    warmup_end_ns: int
    sampler: WorkloadSampler | TraceSampler

    @property
    def id_base(self) -> int:
        return self.index * ID_STRIDE

    def request_id(self, index: int, turn: int = 0) -> int:
        """The id of request ``index`` (turn ``turn`` of its conversation; 0 without one)."""
        return self.id_base + (max(turn - 1, 0) << TURN_SHIFT) + index

    def session_id(self, index: int, turn: int = 0) -> int:
        """The conversation a request belongs to: its first turn's id, or -1 outside a conversation."""
        return self.id_base + index if turn else -1

    def level_at(self, t_ns: int) -> float:
        """The shape's planned level at run time ``t_ns`` (0 outside the phase)."""
        if not self.start_ns <= t_ns < self.end_ns:
            return 0.0
        return float(self.phase.load.shape.level(np.array([(t_ns - self.start_ns) / SECOND]))[0])

    def user_ready_ns(self, user: int, users: int) -> int:
        """When closed-loop user ``user`` of ``users`` first gets ready, on the run clock (the shape's plan)."""
        load = self.phase.load
        return self.start_ns + load.shape.user_start_ns(user, users, load.ramp_up)

    def user_active(self, user: int, t_ns: int) -> bool:
        """Whether closed-loop user ``user`` may send at ``t_ns``: always under a constant level, else while below it."""
        return self.phase.load.shape.constant or user < self.level_at(t_ns)


def open_loop_offsets(scenario: Scenario, phase_index: int = 0) -> np.ndarray:
    """A phase's open-loop schedule in integer nanoseconds from the phase start, reproducible from the seed."""
    load = scenario.phase_list[phase_index].load
    arrivals = SeededArrivals(load.arrival, np.random.default_rng([scenario.seed, 10, phase_index]), load.cv)
    return load.shape.offsets_ns(load.planned_duration, arrivals)


def _sampler(scenario: Scenario, phase: Phase, index: int) -> WorkloadSampler | TraceSampler:
    shape, workload = phase.load.shape, scenario.workload_of(phase)
    tokenizer = load_tokenizer(scenario.tokenizer, scenario.tokenizer_calibration)
    salt = scenario.prompt_salt or 0
    recorded = shape.recorded()
    if recorded is not None:
        return TraceSampler(recorded.plan, workload, scenario.seed, index, recorded.block_size, tokenizer, salt)
    return WorkloadSampler(workload, scenario.seed, stream=index, tokenizer=tokenizer, salt=salt)


def plan_phases(scenario: Scenario) -> list[PhasePlan]:
    plans = []
    for index, phase in enumerate(scenario.phase_list):
        jitter = float(np.random.default_rng([scenario.seed, 30, index]).uniform(0, phase.jitter)) if phase.jitter else 0.0
        start = int((phase.start + jitter) * SECOND)
        plans.append(
            PhasePlan(
                phase=phase,
                index=index,
                start_ns=start,
                end_ns=start + int(phase.load.planned_duration * SECOND),
                warmup_end_ns=start + int(phase.load.warmup * SECOND),
                sampler=_sampler(scenario, phase, index),
            )
        )
    return plans
