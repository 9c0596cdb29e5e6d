"""Fit an engine profile's step-time coefficients to what a replica did under load.

    decode step  = (overhead + decode_base) + s_per_kv_token × KV tokens read
    idle prefill = overhead + prefill_s_per_token × prompt tokens (+ the network)

Both are straight lines, fitted robustly: the samples are binned along x, and a Theil–Sen
line goes through the bins' medians, so the slower steps that share time with a prefill or a
hiccup of the client cannot drag it. Uncertainties come from a seeded
bootstrap over the samples. The running-batch limit is the most requests seen decoding at
once (telemetry's running gauge when there is one) — a lower bound unless the load
saturated the server, which a sweep's top levels do.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.engine.profile import EngineProfile
from surgelab.twin.observations import Observations, observe_runs, run_dirs

__all__ = ["Coefficient", "FitResult", "fit_profile", "line_fit"]

_BINS = 16
_BOOTSTRAP = 100


@dataclass(frozen=True)
class Coefficient:
    value: float
    stderr: float | None  # bootstrap standard error

    @property
    def relative_error(self) -> float | None:
        return self.stderr / abs(self.value) if self.stderr is not None and self.value else None


@dataclass
class FitResult:
    profile: EngineProfile
    coefficients: dict[str, Coefficient]
    residual: dict[str, float]  # relative RMS error of each line against its bin medians
    samples: dict[str, int]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.to_dict(),
            "coefficients": {k: asdict(v) for k, v in self.coefficients.items()},
            "residual": self.residual, "samples": self.samples, "notes": self.notes,
        }  # fmt: skip


def _binned(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    bins = max(2, min(_BINS, x.size // 4))  # at least a few samples behind every median
    edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)))
    if edges.size < 2:
        return np.array([np.median(x)]), np.array([np.median(y)]), np.array([x.size])
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.size - 2)
    xs, ys, ws = [], [], []
    for b in range(edges.size - 1):
        mine = which == b
        if mine.sum() >= 2:
            xs.append(np.median(x[mine]))
            ys.append(np.median(y[mine]))
            ws.append(mine.sum())
    return np.array(xs), np.array(ys), np.array(ws, dtype=float)


def line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(intercept, slope, relative RMS residual) through the bin medians, by Theil–Sen.

    The slope is the median of the slopes between every pair of bins and the intercept the
    median of what each bin leaves, so one bin thrown by a busy moment cannot tilt the line.
    """
    bx, by, bw = _binned(x, y)
    if bx.size < 2 or np.ptp(bx) == 0:
        return float(np.median(y)), 0.0, 0.0
    i, j = np.triu_indices(bx.size, k=1)
    dx = bx[j] - bx[i]
    keep = dx > 0
    b = float(np.median((by[j] - by[i])[keep] / dx[keep])) if keep.any() else 0.0
    a = float(np.median(by - b * bx))
    predicted = a + b * bx
    rms = float(np.sqrt(np.average(((by - predicted) / np.maximum(by, 1e-12)) ** 2, weights=bw)))
    return a, b, rms


def _with_error(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[Coefficient, Coefficient, float]:
    a, b, rms = line_fit(x, y)
    boots = []
    for _ in range(_BOOTSTRAP):
        pick = rng.integers(0, x.size, x.size)
        boots.append(line_fit(x[pick], y[pick])[:2])
    sa, sb = np.std(np.array(boots), axis=0, ddof=1) if boots else (None, None)
    return Coefficient(a, float(sa)), Coefficient(b, float(sb)), rms


def _scraped_running_max(paths: list[Path]) -> int | None:
    """The server's running gauge at its highest, from the runs' telemetry, if any was scraped."""
    best = None
    for path in paths:
        try:
            summary = json.loads((path / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        running = (summary.get("telemetry") or {}).get("roles", {}).get("running")
        if running and running.get("max"):
            best = max(best or 0, int(round(running["max"])))
    return best


def fit_profile(path: Path, base: EngineProfile | None = None, seed: int = 0, running_max: int | None = None) -> FitResult:
    """Fit from a run or a sweep directory; ``base`` supplies what the records cannot show."""
    obs: Observations = observe_runs(run_dirs(path), seed)
    rng = np.random.default_rng([seed, 1])
    notes: list[str] = []
    if obs.gap_s.size < 20:
        raise ValueError(f"{path}: too few streamed token gaps ({obs.gap_s.size}) to fit — stream, and send more requests")
    step_base, s_kv, decode_rms = _with_error(obs.gap_kv, obs.gap_s, rng)
    # A prefill step costs max(memory, compute): only the compute-bound ones carry the slope.
    memory_bound = step_base.value + s_kv.value * obs.prefill_tokens
    compute = obs.prefill_s > 1.3 * memory_bound
    x, y = obs.prefill_tokens[compute], obs.prefill_s[compute]
    if x.size >= 6 and np.ptp(x) > 0:
        overhead, prefill, prefill_rms = _with_error(x, y, rng)
    else:
        notes.append(
            f"{x.size} idle, compute-bound prefills (need 6 with varied lengths) to fit prefill: give the sweep a "
            "low level and long, varied prompts (prompt_tokens as a distribution); prefill and overhead kept from "
            "the base profile"
        )
        reference = base or EngineProfile("unknown", 0.0, 0.0, 0.0, 0.0, 1 << 20, 256, 8192)
        overhead, prefill, prefill_rms = Coefficient(reference.step_overhead_s, None), Coefficient(reference.prefill_s_per_token, None), 0.0
    overhead_s = max(overhead.value, 0.0)
    decode_base = Coefficient(max(step_base.value - overhead_s, 0.0), step_base.stderr)
    scraped = _scraped_running_max(run_dirs(path))
    slots = running_max or scraped or obs.max_running
    if running_max is None and scraped is None:
        notes.append(f"max_num_seqs = {slots}, the most requests seen decoding at once: a lower bound unless the load saturated the server")
    elif running_max is None:
        notes.append(f"max_num_seqs = {slots}, the server's own running gauge at its highest (telemetry)")
    template = base or EngineProfile("fitted", 0.0, 0.0, 0.0, 0.0, 1 << 22, slots, 8192)
    if base is None:
        notes.append("kv_capacity_tokens and max_batched_tokens are not visible from the client: generous defaults used")
    profile = replace(
        template, name="fitted", prefill_s_per_token=max(prefill.value, 0.0), decode_base_s=decode_base.value,
        s_per_kv_token=max(s_kv.value, 0.0), step_overhead_s=overhead_s, max_num_seqs=max(slots, 1),
        description=f"fitted from {path}",
    )  # fmt: skip
    return FitResult(
        profile=profile,
        coefficients={
            "prefill_s_per_token": prefill, "decode_base_s": decode_base, "s_per_kv_token": s_kv,
            "step_overhead_s": overhead, "decode_step_base_s": step_base,
        },  # fmt: skip
        residual={"decode": decode_rms, "prefill": prefill_rms},
        samples={
            "decode_gaps": int(obs.gap_s.size), "idle_prefills": int(obs.prefill_s.size),
            "compute_bound_prefills": int(x.size), "requests": obs.requests,
        },  # fmt: skip
        notes=notes,
    )
