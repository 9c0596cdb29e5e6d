"""Check a fitted twin: run a held-out scenario for real and in the simulator, compare.

The held-out scenario should differ from the fit's sweep in rate, shape and length mix; the
twin passes when throughput, TTFT and E2E at P50 are within ``p50_tolerance`` of the
measurement and at P99 within ``p99_tolerance``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from surgelab.aio import run_async
from surgelab.engine.profile import EngineProfile
from surgelab.runner.run import run_scenario, with_salt
from surgelab.scenario.loader import ScenarioError, load_scenario
from surgelab.scenario.model import Scenario
from surgelab.sim.loader import build_fleet
from surgelab.sim.run import simulate

__all__ = ["TwinCheck", "validate_twin", "check_measured", "compare_summaries"]

METRICS = (
    ("throughput", ("throughput", "requests_per_s"), "p50"),
    ("ttft_p50", ("latency_ms", "ttft", "p50"), "p50"),
    ("e2e_p50", ("latency_ms", "e2e", "p50"), "p50"),
    ("ttft_p99", ("latency_ms", "ttft", "p99"), "p99"),
    ("e2e_p99", ("latency_ms", "e2e", "p99"), "p99"),
)


@dataclass
class TwinCheck:
    errors: dict[str, float | None]  # relative error of the prediction per metric
    measured: dict[str, float | None]
    predicted: dict[str, float | None]
    passed: bool
    tolerances: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _get(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = summary
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def compare_summaries(measured: dict[str, Any], predicted: dict[str, Any], p50_tolerance: float = 0.15,
                      p99_tolerance: float = 0.25) -> TwinCheck:  # fmt: skip
    errors, m, p = {}, {}, {}
    passed = True
    for name, path, kind in METRICS:
        a, b = _get(measured, path), _get(predicted, path)
        m[name], p[name] = a, b
        error = (b - a) / a if a and b is not None else None
        errors[name] = error
        limit = p50_tolerance if kind == "p50" else p99_tolerance
        passed &= error is not None and abs(error) <= limit
    return TwinCheck(errors, m, p, passed, {"p50": p50_tolerance, "p99": p99_tolerance})


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
    check = compare_summaries(summary, predicted, p50_tolerance, p99_tolerance)
    (out / "twin-check.yaml").write_text(yaml.safe_dump(check.to_dict(), sort_keys=False), encoding="utf-8")
    return check
