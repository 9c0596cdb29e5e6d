"""Fitting the engine model's efficiencies to real runs, and holding each model out to judge the fit.

The quantities fitted are the few a data sheet cannot give (``surgelab.engine.calibration.Efficiency``):
achieved fractions of HBM bandwidth and of tensor FLOP/s, the engine's CPU time per step and per
sequence, the all-reduce latency, the front end's time per request. The objective is the runs'
mean E2E and mean TTFT per stage — engine-side evidence of the step time is the E2E's decode part
(``E2E − TTFT`` over ``output − 1`` tokens), and TTFT alone carries the front end — each predicted
by the steady-state analysis of the same physics (``surgelab.engine.steady``), so a fit takes
seconds; the figures judged are then simulated (``accuracy_runs.predict``).

``leave_one_model_out`` fits once per model on every other model's runs: the held-out model's
prediction never saw its own data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from accuracy_runs import RealRun, deployment
from scipy.optimize import least_squares

from surgelab.engine.calibration import Efficiency
from surgelab.engine.steady import steady_state

__all__ = ["FITTED", "Fit", "fit", "leave_one_model_out", "steady_figures"]

# name: (lower, upper, scale) — a fitted value is scale · x, x within [lower, upper]
FITTED: dict[str, tuple[float, float, float]] = {
    "hbm": (0.4, 1.0, 1.0),
    "mfu": (0.2, 1.0, 1.0),
    "step_s": (0.0, 5.0, 1e-3),
    "seq_s": (0.0, 0.5, 1e-4),
    "all_reduce_s": (0.0, 8.0, 1e-5),
    "request_s": (0.0, 6.0, 1e-2),
}
MOE_FITTED: dict[str, tuple[float, float, float]] = {"expert_hbm": (0.2, 1.0, 1.0)}
"""Fitted on mixture-of-experts runs alone, once the dense figures are fixed by the dense runs, and on
their E2E alone: the experts are engine time, while a TTFT also holds the model's own front end."""


@dataclass
class Fit:
    efficiency: Efficiency
    runs: tuple[str, ...]
    rms_log_error: float
    residuals: int


def steady_figures(run: RealRun, efficiency: Efficiency) -> dict[tuple[int, str], float]:
    """Mean E2E and TTFT (ms) of each stage by the steady-state analysis; inf where it overloads."""
    profile = deployment(run, efficiency).profile()
    system, question, output = run.lengths
    cached = system // profile.block_size * profile.block_size
    figures = {}
    for stage, rate in enumerate(run.rates):
        state = steady_state(profile, rate, system + question, output, cached)
        bad = state.overloaded
        figures[(stage, "e2e_mean")] = math.inf if bad else state.e2e * 1e3
        figures[(stage, "ttft_mean")] = math.inf if bad else state.ttft * 1e3
    return figures


def _efficiency(x: np.ndarray, bounds: dict[str, tuple[float, float, float]], base: Efficiency) -> Efficiency:
    return base.with_values(**{n: float(v) * bounds[n][2] for n, v in zip(bounds, x)})


def fit(runs: Sequence[RealRun], base: Efficiency = Efficiency()) -> Fit:
    """The efficiencies that best predict the runs' mean E2E and TTFT (least squares on log ratios).

    Two steps, so that one kind of model cannot bend the other's figures: the dense runs fix
    every figure but the experts'; then the mixture-of-experts runs fix ``expert_hbm``. What
    the runs cannot show is not fitted: without an MoE run, ``expert_hbm`` is the dense ``hbm``.
    """
    dense = [r for r in runs if not deployment(r).model.is_moe]
    moe = [r for r in runs if deployment(r).model.is_moe]
    eff, r_dense = _least_squares(dense, FITTED, base, ("e2e_mean", "ttft_mean"))
    r_moe = np.array([])
    if moe:
        eff, r_moe = _least_squares(moe, MOE_FITTED, eff, ("e2e_mean",))
    else:
        eff = eff.with_values(expert_hbm=eff.hbm)
    r = np.concatenate([r_dense, r_moe])
    return Fit(eff, tuple(run.key for run in runs), float(np.sqrt(np.mean(r**2))), r.size)


def _least_squares(
    runs: Sequence[RealRun], bounds: dict[str, tuple[float, float, float]], base: Efficiency, metrics: tuple[str, ...]
) -> tuple[Efficiency, np.ndarray]:
    names = list(bounds)

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = _efficiency(x, bounds, base)
        out = []
        for run in runs:
            for key, predicted in steady_figures(run, eff).items():
                if key[1] not in metrics:
                    continue
                actual = run.actual[key]
                out.append(math.log(predicted / actual) if math.isfinite(predicted) else 3.0)
        return np.array(out)

    lower = [bounds[n][0] for n in names]
    upper = [bounds[n][1] for n in names]
    start = np.clip([getattr(base, n) / bounds[n][2] for n in names], lower, upper)
    result = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac", diff_step=1e-3)
    return _efficiency(result.x, bounds, base), residuals(result.x)


def leave_one_model_out(runs: Sequence[RealRun], base: Efficiency = Efficiency()) -> dict[str, Fit]:
    """For each model: the fit on every other model's runs."""
    models = sorted({run.model for run in runs})
    return {model: fit([r for r in runs if r.model != model], base) for model in models}
