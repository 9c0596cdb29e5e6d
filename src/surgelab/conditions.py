"""Threshold expressions (pass/fail criteria and stop conditions) as k6 writes them: ``p99(ttft) < 2s``, ``error_rate < 0.5%``.

Parsed once at validation into a typed ``Threshold`` so that a typo is a scenario error with
a line number, not a surprise at the end of a one-hour soak.
"""

from __future__ import annotations

import operator
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from surgelab.units import parse_duration, parse_ratio

__all__ = ["Threshold", "LATENCY_METRICS", "RATE_METRICS"]

LATENCY_METRICS = ("ttft", "itl", "tpot", "e2e")
RATE_METRICS = {  # name -> unit kind
    "error_rate": "ratio",
    "drop_rate": "ratio",
    "throughput": "number",  # successful requests per second
    "output_tokens_per_s": "number",
    "goodput": "number",  # requests per second meeting every SLO
}
OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

_LATENCY = re.compile(
    r"^\s*(?P<agg>p\d{1,2}(?:\.\d+)?|mean|avg|median|min|max)\s*\(\s*(?P<metric>\w+)\s*\)"
    r"\s*(?P<op><=|>=|<|>)\s*(?P<value>\S+)\s*$"
)
_RATE = re.compile(r"^\s*(?P<metric>\w+)\s*(?P<op><=|>=|<|>)\s*(?P<value>\S+)\s*$")
_FORMS = "forms: 'p99(ttft) < 2s', 'mean(itl) <= 50ms', 'error_rate < 0.5%', 'throughput > 10'"


class Threshold(BaseModel):
    """A pass/fail criterion on the run's summary; ``abort_on_fail`` stops the run early."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expr: str
    abort_on_fail: bool = False
    metric: str = ""
    aggregation: str | None = None  # p99, mean, ... for latency metrics
    op: Literal["<", "<=", ">", ">="] = "<"
    value: float = 0.0  # seconds for latencies, a fraction for ratios

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {"expr": data}
        if not isinstance(data, dict) or "expr" not in data:
            raise ValueError(f"expected a threshold expression; {_FORMS}")
        expr = str(data["expr"])
        if m := _LATENCY.match(expr):
            metric, agg = m["metric"], m["agg"].replace("avg", "mean").replace("median", "p50")
            if metric not in LATENCY_METRICS:
                raise ValueError(
                    f"unknown latency metric {metric!r} in {expr!r}; expected one of {', '.join(LATENCY_METRICS)}"
                )
            if agg.startswith("p") and not 0 < float(agg[1:]) < 100:
                raise ValueError(f"percentile out of range in {expr!r}")
            try:
                value = parse_duration(m["value"])
            except ValueError as e:
                raise ValueError(f"{expr!r}: {e}") from None
        elif m := _RATE.match(expr):
            metric, agg = m["metric"], None
            if metric not in RATE_METRICS:
                known = ", ".join([*RATE_METRICS, *(f"pNN({x})" for x in LATENCY_METRICS)])
                raise ValueError(f"unknown metric {metric!r} in {expr!r}; expected one of {known}")
            try:
                value = parse_ratio(m["value"]) if RATE_METRICS[metric] == "ratio" else float(m["value"])
            except ValueError as e:
                raise ValueError(f"{expr!r}: {e}") from None
        else:
            raise ValueError(f"cannot read threshold {expr!r}; {_FORMS}")
        return {**data, "metric": metric, "aggregation": agg, "op": m["op"], "value": value}

    def passes(self, observed: float | None) -> bool:
        """True when the observed value meets the threshold; no data never passes."""
        if observed is None or observed != observed:
            return False
        return OPERATORS[self.op](observed, self.value)

    @property
    def key(self) -> str:
        """The summary quantity it reads, e.g. ``p99(ttft)`` or ``error_rate``."""
        return f"{self.aggregation}({self.metric})" if self.aggregation else self.metric
