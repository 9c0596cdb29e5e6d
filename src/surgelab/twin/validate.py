"""Check a fitted twin: run a held-out scenario for real and in the simulator, compare.

The held-out scenario should differ from the fit's sweep in rate, shape and length mix; the
twin passes when throughput, TTFT and E2E at P50 are within ``p50_tolerance`` of the
measurement and at P99 within ``p99_tolerance``.

A measured figure is itself uncertain: a percentile of a few dozen requests moves by more
than 10 % when one request changes. Each metric is therefore *within* the tolerance,
*outside* it (and outside the measured figure's own 95 % interval), or *undecided*: outside
the tolerance but inside that interval (without records to bound it: a percentile too sparse
to be a figure, ``analysis.stats.sparse_percentile``). Undecided says "measure longer", never
"pass".
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from surgelab.aio import run_async
from surgelab.analysis.stats import percentile_interval, rate_interval, sparse_percentile
from surgelab.analysis.summary import RecordColumns
from surgelab.engine.profile import EngineProfile
from surgelab.metrics.record import State
from surgelab.runner.run import run_scenario, with_salt
from surgelab.scenario.loader import ScenarioError, load_scenario
from surgelab.scenario.model import Scenario
from surgelab.sim.loader import build_fleet
from surgelab.sim.run import simulate
from surgelab.twin.steps import step_checks

__all__ = ["TwinCheck", "validate_twin", "check_measured", "compare_summaries", "measured_intervals"]

METRICS = (
    ("throughput", ("throughput", "requests_per_s"), "p50"),
    ("ttft_p50", ("latency_ms", "ttft", "p50"), "p50"),
    ("e2e_p50", ("latency_ms", "e2e", "p50"), "p50"),
    ("ttft_p99", ("latency_ms", "ttft", "p99"), "p99"),
    ("e2e_p99", ("latency_ms", "e2e", "p99"), "p99"),
)
WITHIN, OUTSIDE, UNDECIDED = "within", "outside", "undecided"


@dataclass
class TwinCheck:
    errors: dict[str, float | None]  # relative error of the prediction per metric
    measured: dict[str, float | None]
    predicted: dict[str, float | None]
    passed: bool  # every metric within its tolerance
    tolerances: dict[str, float]
    status: dict[str, str] = field(default_factory=dict)  # within / outside / undecided, per metric
    intervals: dict[str, list[float] | None] = field(default_factory=dict)  # the measured figure's 95 % interval
    verdict: str = ""  # pass / fail (some metric outside) / undecided (none outside, some undecided)
    steps: list[dict[str, Any]] = field(default_factory=list)  # the profile's steps against the measured ones (steps.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _get(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = summary
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def compare_summaries(
    measured: dict[str, Any], predicted: dict[str, Any], p50_tolerance: float = 0.15, p99_tolerance: float = 0.25,
    intervals: dict[str, tuple[float, float]] | None = None,
) -> TwinCheck:  # fmt: skip
    """Relative error and status per metric; ``intervals`` (``measured_intervals``) bound the measured figures."""
    errors, m, p, status, bounds = {}, {}, {}, {}, {}
    for name, path, kind in METRICS:
        a, b = _get(measured, path), _get(predicted, path)
        m[name], p[name] = a, b
        error = (b - a) / a if a and b is not None else None
        errors[name] = error
        interval = (intervals or {}).get(name)
        bounds[name] = [float(interval[0]), float(interval[1])] if interval else None
        limit = p50_tolerance if kind == "p50" else p99_tolerance
        if error is not None and abs(error) <= limit:
            status[name] = WITHIN
        elif error is not None and b is not None and (
            interval[0] <= b <= interval[1] if interval is not None else _sparse(measured, name)
        ):
            status[name] = UNDECIDED
        else:
            status[name] = OUTSIDE
    verdict = "fail" if OUTSIDE in status.values() else "undecided" if UNDECIDED in status.values() else "pass"
    return TwinCheck(errors, m, p, verdict == "pass", {"p50": p50_tolerance, "p99": p99_tolerance}, status, bounds, verdict)


def _sparse(summary: dict[str, Any], name: str) -> bool:
    """A percentile of too few requests to be a figure (a summary without counts is taken at its word)."""
    if name == "throughput":
        return False
    metric, q = name.split("_p")
    count = _get(summary, ("latency_ms", metric, "count"))
    return count is not None and sparse_percentile(int(count), float(q))


def measured_intervals(run: Path, rate: float | None) -> dict[str, tuple[float, float]]:
    """The 95 % interval of each measured figure of ``run``, from its records (``rate``: its throughput).

    Percentiles: distribution-free order-statistic bounds over the requests the summary
    counts (successful, out of the warm-up; latency from the intended send). Throughput:
    Poisson bounds on the number of completions. Both treat requests as independent; in a
    queue they are not (one slow step delays a whole batch), so the true spread is wider.
    """
    c = RecordColumns(run)
    ok = (c.state == State.OK.value) & ~c.warmup
    out: dict[str, tuple[float, float]] = {}
    for metric, ends in (("ttft", c.first_token), ("e2e", c.end)):
        values = (ends[ok] - c.intended[ok]) * 1000.0
        values = values[~np.isnan(values)]
        for q in (50, 99):
            out[f"{metric}_p{q}"] = percentile_interval(values, q)
    low, high = rate_interval(int(ok.sum()))
    out["throughput"] = (rate * low, rate * high) if rate else (0.0, math.inf)
    return out


def validate_twin(
    scenario: Scenario, profile: EngineProfile, out: Path, *, api_key: str | None = None,
    p50_tolerance: float = 0.15, p99_tolerance: float = 0.25,
) -> TwinCheck:  # fmt: skip
    """Measure ``scenario`` against its target, simulate it on one replica of ``profile``, compare."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    measured = run_async(run_scenario(with_salt(scenario), out / "measured", api_key=api_key)).run_dir
    return check_measured(measured, profile, out, p50_tolerance=p50_tolerance, p99_tolerance=p99_tolerance)


def check_measured(
    measured: Path, profile: EngineProfile, out: Path, *, p50_tolerance: float = 0.15, p99_tolerance: float = 0.25
) -> TwinCheck:
    """Simulate a run measured earlier (its saved scenario: same seed and salt, same requests) on one
    replica of ``profile`` and compare with its summary — a new profile checked without measuring again."""
    measured, out = Path(measured), Path(out)
    try:
        summary = json.loads((measured / "summary.json").read_text(encoding="utf-8"))
        scenario = load_scenario(measured / "scenario.yaml")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{measured}: not a finished run directory (summary.json and scenario.yaml): {exc}") from None
    except ScenarioError as exc:
        raise ValueError(f"{measured}/scenario.yaml: {exc}") from None
    out.mkdir(parents=True, exist_ok=True)
    profile_file = out / "twin-profile.yaml"
    profile_file.write_text(yaml.safe_dump(profile.to_dict(), sort_keys=False), encoding="utf-8")
    fleet = build_fleet({"name": "twin", "pools": [{"name": "twin", "replicas": 1, "profile": str(profile_file)}]})
    predicted = simulate(scenario, fleet, out / "simulated").summary
    intervals = measured_intervals(measured, _get(summary, ("throughput", "requests_per_s")))
    check = compare_summaries(summary, predicted, p50_tolerance, p99_tolerance, intervals)
    check.steps = [step.to_dict() for step in step_checks(measured, profile)]
    (out / "twin-check.yaml").write_text(yaml.safe_dump(check.to_dict(), sort_keys=False), encoding="utf-8")
    return check
