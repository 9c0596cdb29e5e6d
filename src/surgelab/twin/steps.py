"""Where a twin's misses come from: its step times against the steps a run measured.

A held-out run can miss for two reasons: the profile prices steps wrongly, or the steps are
right and the queue amplifies a small error (near saturation a 5 % slower prefill moves TTFT
P50 by a quarter). This sets the profile's step time beside every pure decode step the run's
records show (``observations``), grouped by how many sequences were decoding, and the idle
prefills beside the profile's prefill: a group far off names the term to fix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.engine import Engine, EngineProfile, EngineRequest
from surgelab.twin.observations import observe_runs

__all__ = ["StepCheck", "step_checks"]


@dataclass(frozen=True)
class StepCheck:
    kind: str  # "decode" (a step of ``batch`` sequences) or "idle prefill" (a prompt alone, to first token)
    batch: int  # sequences decoding (decode), 1 (idle prefill)
    samples: int
    measured_ms: float  # median
    predicted_ms: float  # median of the profile's time for the same steps
    error: float  # predicted_ms / measured_ms − 1: the medians as shown

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_checks(run: Path, profile: EngineProfile, min_samples: int = 20) -> list[StepCheck]:
    """Decode steps by batch size (groups of at least ``min_samples``), then the idle prefills."""
    obs = observe_runs([Path(run)])
    checks = []
    predicted = np.array(profile.step_times(obs.gap_batch.astype(int).tolist(), obs.gap_kv.astype(int).tolist()))
    for batch in np.unique(obs.gap_batch).astype(int):
        pick = obs.gap_batch == batch
        if pick.sum() >= min_samples:
            checks.append(_check("decode", batch, obs.gap_s[pick], predicted[pick]))
    if obs.prefill_s.size:
        alone = np.array([_first_token_alone(profile, int(p)) for p in obs.prefill_tokens])
        checks.append(_check("idle prefill", 1, obs.prefill_s, alone))
    return checks


def _check(kind: str, batch: int, measured: np.ndarray, predicted: np.ndarray) -> StepCheck:
    keep = measured > 0
    measured, predicted = measured[keep], predicted[keep]
    m, p = float(np.median(measured)), float(np.median(predicted))
    return StepCheck(kind, int(batch), int(measured.size), m * 1e3, p * 1e3, p / m - 1.0)


def _first_token_alone(profile: EngineProfile, prompt: int) -> float:
    """Seconds from send to first token of one prompt on an idle engine (chunked as the engine chunks it)."""
    engine = Engine(profile)
    engine.add(EngineRequest("alone", prompt, 1))
    seconds = profile.request_overhead_s
    while engine.has_work:
        step = engine.step()
        seconds += step.duration
        if step.emitted:
            break
    return seconds
