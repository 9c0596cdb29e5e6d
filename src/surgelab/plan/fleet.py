"""Fleet sizing from a per-instance SLA capacity: instances, spares, cost, and how likely the SLA holds.

The seeds' rule, with the arithmetic kept so a reader can redo it:
``instances = ceil(peak ÷ (per-instance SLA capacity × safety))``, plus ``k`` spares for
N+k failure tolerance. The forecast peak is uncertain: the cost–availability table treats
the actual peak as lognormal with the forecast as its mean and a stated coefficient of
variation, and gives for each fleet size the probability that the peak stays within what
the fleet serves at its SLA (``instances × capacity``), with all instances up and with one
down.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FleetInputs", "FleetPlan", "size_fleet", "lognormal_cdf", "availability_table"]

HOURS_PER_MONTH = 730.0  # 8,760 h ÷ 12


@dataclass(frozen=True)
class FleetInputs:
    """What sizing needs; rates in requests/s, cost per GPU-hour in any currency."""

    peak: float
    capacity: float  # per-instance SLA capacity, requests/s
    safety: float = 0.7  # use at most this fraction of the capacity at the peak (0.7 = 30 % headroom)
    spares: int = 0  # k of N+k
    gpus_per_instance: int = 1
    gpu_hour_cost: float | None = None
    peak_cv: float = 0.2  # coefficient of variation of the actual peak around the forecast
    hours_per_month: float = HOURS_PER_MONTH

    def problems(self) -> list[str]:
        out = []
        for name in ("peak", "capacity"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                out.append(f"{name} must be a finite number > 0, got {v!r}")
        if not (0 < self.safety <= 1):
            out.append(f"safety must be in (0, 1] (0.7 keeps 30% headroom), got {self.safety!r}")
        if self.spares < 0:
            out.append(f"spares must be >= 0, got {self.spares}")
        if self.gpus_per_instance < 1:
            out.append(f"GPUs per instance must be >= 1, got {self.gpus_per_instance}")
        if self.gpu_hour_cost is not None and not (math.isfinite(self.gpu_hour_cost) and self.gpu_hour_cost >= 0):
            out.append(f"cost per GPU-hour must be a finite number >= 0, got {self.gpu_hour_cost!r}")
        if not (math.isfinite(self.peak_cv) and self.peak_cv >= 0):
            out.append(f"peak CV must be a finite number >= 0, got {self.peak_cv!r}")
        return out


@dataclass(frozen=True)
class FleetPlan:
    inputs: FleetInputs
    base: int  # N: instances for the peak at the safety factor
    total: int  # N + k
    per_instance_target: float  # capacity × safety, requests/s
    utilisation_at_peak: float  # peak ÷ (total × capacity)
    headroom_at_peak: float  # 1 − peak ÷ (N × capacity): spare SLA capacity with N instances at the peak
    gpus: int
    cost_per_hour: float | None
    cost_per_month: float | None
    arithmetic: list[str] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lognormal_cdf(x: float, mean: float, cv: float) -> float:
    """P(X <= x) for a lognormal X of the given mean and coefficient of variation (cv 0: a point mass)."""
    if cv == 0:
        return 1.0 if x >= mean else 0.0
    if x <= 0:
        return 0.0
    sigma2 = math.log1p(cv * cv)
    mu = math.log(mean) - sigma2 / 2
    return 0.5 * (1 + math.erf((math.log(x) - mu) / math.sqrt(2 * sigma2)))


def _cost(inputs: FleetInputs, instances: int) -> tuple[float | None, float | None]:
    if inputs.gpu_hour_cost is None:
        return None, None
    hourly = instances * inputs.gpus_per_instance * inputs.gpu_hour_cost
    return hourly, hourly * inputs.hours_per_month


def availability_table(inputs: FleetInputs, low: int, high: int) -> list[dict[str, Any]]:
    """For each fleet size: cost, utilisation at the forecast peak, P(SLA holds) all up and one down."""
    rows = []
    for n in range(max(1, low), high + 1):
        hourly, monthly = _cost(inputs, n)
        rows.append({
            "instances": n,
            "gpus": n * inputs.gpus_per_instance,
            "cost_per_month": monthly,
            "cost_per_hour": hourly,
            "utilisation_at_peak": inputs.peak / (n * inputs.capacity),
            "p_sla": lognormal_cdf(n * inputs.capacity, inputs.peak, inputs.peak_cv),
            "p_sla_one_down": lognormal_cdf((n - 1) * inputs.capacity, inputs.peak, inputs.peak_cv) if n > 1 else 0.0,
        })  # fmt: skip
    return rows


def size_fleet(inputs: FleetInputs) -> FleetPlan:
    """Instances for the peak at the safety factor, plus spares, with the arithmetic written out."""
    problems = inputs.problems()
    if problems:
        raise ValueError("; ".join(problems))
    target = inputs.capacity * inputs.safety
    exact = inputs.peak / target
    base = max(1, math.ceil(exact - 1e-9))  # 1000 ÷ 70 = 14.29 → 15; 700 ÷ 70 = 10 stays 10
    total = base + inputs.spares
    hourly, monthly = _cost(inputs, total)
    lines = [
        f"per-instance target = SLA capacity × safety = {inputs.capacity:.6g} × {inputs.safety:g} = {target:.6g} req/s",
        f"instances = ceil(peak ÷ target) = ceil({inputs.peak:.6g} ÷ {target:.6g}) = ceil({exact:.4g}) = {base}",
    ]
    if inputs.spares:
        lines.append(f"with N+{inputs.spares} failure tolerance: {base} + {inputs.spares} = {total}")
    lines.append(
        f"at the peak: {inputs.peak:.6g} ÷ ({total} × {inputs.capacity:.6g}) = "
        f"{inputs.peak / (total * inputs.capacity):.1%} of the fleet's SLA capacity"
    )
    if hourly is not None and monthly is not None:
        lines.append(
            f"cost = {total} × {inputs.gpus_per_instance} GPU × {inputs.gpu_hour_cost:g}/GPU-h = {hourly:,.2f}/h; "
            f"× {inputs.hours_per_month:g} h = {monthly:,.0f}/month"
        )
    return FleetPlan(
        inputs=inputs,
        base=base,
        total=total,
        per_instance_target=target,
        utilisation_at_peak=inputs.peak / (total * inputs.capacity),
        headroom_at_peak=1 - inputs.peak / (base * inputs.capacity),
        gpus=total * inputs.gpus_per_instance,
        cost_per_hour=hourly,
        cost_per_month=monthly,
        arithmetic=lines,
        table=availability_table(inputs, base - 2, total + 3),
    )
