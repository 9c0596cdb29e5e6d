"""Requirement profiles: the seed's four groups of criteria, each a threshold with a weight.

A profile is YAML (``examples/requirements.yaml``)::

    core_performance:
      - {require: "p90(e2e) <= 3s", weight: 3, must: true}
      - {require: "volatility_7d <= 15%", weight: 2}
    business_fit:
      - require: max_context >= 65536

Load metrics (``p90(e2e)``, ``error_rate``, ``throughput`` …) use the threshold syntax of
``surgelab.conditions``; the other metrics read probe results, the monitoring history or the
cost model (``METRICS``). Parsing happens once, at load, so a typo is a ``file:line`` error.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from surgelab.conditions import Threshold
from surgelab.scenario.loader import describe_error, line_of
from surgelab.units import parse_duration, parse_ratio
from surgelab.yamlfile import read_yaml

__all__ = [
    "METRICS", "GROUPS", "PeakHours", "Requirement", "RequirementProfile", "RequirementError", "load_requirements",
    "parse_hours",
]  # fmt: skip

# Non-load metrics: name -> (unit, where the value comes from, what it means).
METRICS: dict[str, tuple[str, str, str]] = {
    "max_context": ("tokens", "probe", "longest prompt the endpoint accepted (binary search)"),
    "multi_turn_retention": ("turns", "probe", "most turns after which a fact from turn 1 was still recalled"),
    "openai_compat": ("pass", "probe", "every OpenAI-conformance check passed"),
    "output_control": ("pass", "probe", "max_tokens (and ignore_eos when offered) were obeyed"),
    "models_listed": ("pass", "probe", "GET /models lists the model under test"),
    "cold_start": ("seconds", "probe", "first request after idle minus a warm request"),
    "volatility_7d": ("ratio", "history", "coefficient of variation of hourly throughput over the last 7 days"),
    "peak_p90": ("seconds", "history", "P90 end-to-end latency during the peak hours"),
    "history_error_rate": ("ratio", "history", "failed ÷ finished over the last 7 days of monitoring"),
    "regressions": ("count", "history", "metrics more than 20 % worse than the previous week"),
    "cost_per_mtok": ("currency", "cost", "price per million tokens at the measured throughput"),
    "network_rtt": ("seconds", "probe", "TCP connect time to the endpoint, median of 5: the network alone, no inference"),
    "burst_slowdown": ("times", "probe", "median latency of 8 simultaneous requests ÷ one alone; none if any failed"),
    "model_families": ("set", "probe", "model families GET /models lists (deepseek, qwen, llama …), or declared"),
    "regions": ("set", "declared", "regions served: names, or their count ('regions >= 3')"),
    "dedicated_path": ("pass", "declared", "an upgrade path to dedicated resources"),
    "burst_plan": ("pass", "declared", "a stated plan for traffic bursts (reserved capacity, quota raise)"),
    "support": ("set", "declared", "support terms, e.g. 24x7, named engineer, response time"),
    "compliance": ("set", "declared", "compliance terms, e.g. iso27001, soc2, data residency"),
    "pricing_model": ("set", "declared", "how it is billed: per_token, per_instance, reserved"),
}
GROUPS = ("core_performance", "business_fit", "architecture_compatibility", "commercial")
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_EXPR = re.compile(r"^\s*(?P<metric>\w+)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<value>\S+)\s*$")
_INCLUDES = re.compile(r"^\s*(?P<metric>\w+)\s+includes\s+(?P<items>.+?)\s*$")
_SUMMARY_AGGS = ("p50", "p90", "p95", "p99", "mean", "min", "max")


class RequirementError(Exception):
    """An unusable profile; ``messages`` holds one ``file:line: what`` line per problem."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        super().__init__("\n".join(messages))


class Requirement(BaseModel):
    """One criterion: an expression, its weight in the ranking, and whether failing it disqualifies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    require: str = Field(description="e.g. 'p90(e2e) <= 3s', 'max_context >= 65536', 'openai_compat == pass'")
    name: str = ""
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    must: bool = Field(False, description="A failure disqualifies the target, whatever its score.")
    group: str = ""
    metric: str = ""
    op: Literal["<", "<=", ">", ">=", "==", "!=", "includes"] = "<"
    value: float = 0.0  # seconds, a fraction, tokens, turns, 1.0 for pass
    items: tuple[str, ...] = ()  # ``includes``: every one must be among the fact's items
    source: Literal["run", "probe", "history", "cost", "declared"] = "run"

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {"require": data}
        if not isinstance(data, dict) or "require" not in data:
            return data  # pydantic reports the missing field
        expr = str(data["require"])
        if (inc := _INCLUDES.match(expr)) and inc["metric"] in METRICS:
            unit, source, _ = METRICS[inc["metric"]]
            if unit != "set":
                raise ValueError(f"{expr!r}: 'includes' applies to {', '.join(k for k, v in METRICS.items() if v[0] == 'set')}")
            items = tuple(i.strip().lower() for i in inc["items"].split(",") if i.strip())
            return {**data, "metric": inc["metric"], "op": "includes", "items": items, "source": source}
        m = _EXPR.match(expr)
        if m and m["metric"] in METRICS:
            unit, source, _ = METRICS[m["metric"]]
            metric, op = m["metric"], m["op"]
            value = _value(unit, m["value"], expr)
        else:
            if m and m["op"] in ("==", "!="):
                raise ValueError(f"{expr!r}: == and != only apply to {', '.join(METRICS)}")
            try:
                threshold = Threshold(expr=expr)
            except ValueError as exc:
                known = ", ".join(METRICS)
                raise ValueError(f"{str(exc).removeprefix('Value error, ')} (or a provider metric: {known})") from None
            if threshold.aggregation and threshold.aggregation not in _SUMMARY_AGGS:
                raise ValueError(f"{expr!r}: summaries hold {', '.join(_SUMMARY_AGGS)} only")
            metric, op, value, source = threshold.key, threshold.op, threshold.value, "run"
        return {**data, "metric": metric, "op": op, "value": value, "source": source}

    @property
    def label(self) -> str:
        return self.name or self.require

    @property
    def unit(self) -> str:
        if self.metric in METRICS:
            return METRICS[self.metric][0]
        if "(" in self.metric:
            return "seconds"
        return "ratio" if self.metric in ("error_rate", "drop_rate") else "number"

    def passes(self, observed: float | None, items: tuple[str, ...] | None = None) -> bool:
        """No measurement never passes; ``includes`` needs every item among the fact's."""
        if self.op == "includes":
            return items is not None and set(self.items) <= {i.lower() for i in items}
        if observed is None or observed != observed:
            return False
        return bool(OPS[self.op](observed, self.value))


def _value(unit: str, raw: str, expr: str) -> float:
    try:
        if unit == "pass":
            if raw.lower() not in ("pass", "fail"):
                raise ValueError("expected pass or fail")
            return 1.0 if raw.lower() == "pass" else 0.0
        if unit == "seconds":
            return parse_duration(raw)
        if unit == "ratio":
            return parse_ratio(raw)
        if unit == "set":
            return float(raw)  # a count: 'regions >= 3'
        if unit == "tokens" and raw.lower().endswith("k"):
            return float(raw[:-1]) * 1024  # 64k = 65,536 tokens, as context sizes are quoted
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{expr!r}: {exc}") from None


def parse_hours(text: str) -> tuple[int, int]:
    """``9-11`` → (9, 11): whole hours of the day, 0 <= start < end <= 24."""
    try:
        start, end = (int(x) for x in str(text).split("-"))
    except ValueError:
        raise ValueError(f"expected hours such as 9-11, got {text!r}") from None
    if not 0 <= start < end <= 24:
        raise ValueError(f"hours must satisfy 0 <= start < end <= 24, got {text!r}")
    return start, end


class PeakHours(BaseModel):
    """The users' peak: hours of the day in their time zone, so that ``peak_p90`` is the same
    verdict on whichever machine scores it."""

    model_config = ConfigDict(extra="forbid")

    tz: str = Field(description="IANA time zone of the users, e.g. Asia/Shanghai or UTC.")
    hours: str = Field("9-11", description="Peak hours, start-end.")

    @model_validator(mode="after")
    def _valid(self) -> PeakHours:
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {self.tz!r} (an IANA name such as UTC or Asia/Shanghai)") from None
        parse_hours(self.hours)
        return self

    @property
    def span(self) -> tuple[int, int]:
        return parse_hours(self.hours)


class RequirementProfile(BaseModel):
    """The four groups of the seed; each a list of requirements (all optional), and the users' peak hours."""

    model_config = ConfigDict(extra="forbid")

    name: str = "requirements"
    peak: PeakHours | None = None
    core_performance: list[Requirement] = Field(default_factory=list)
    business_fit: list[Requirement] = Field(default_factory=list)
    architecture_compatibility: list[Requirement] = Field(default_factory=list)
    commercial: list[Requirement] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> RequirementProfile:
        if not self.requirements():
            raise ValueError(f"no requirements: give at least one under {', '.join(GROUPS)}")
        return self

    def requirements(self) -> list[Requirement]:
        """Every requirement, in file order, each knowing its group."""
        return [r.model_copy(update={"group": g}) for g in GROUPS for r in getattr(self, g)]


def _key_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Line of the *key* an unknown field was written with (its value may start lines later)."""
    parent = line_of(root, loc[:-1]) if loc[:-1] else None
    node = root
    for part in loc[:-1]:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == part), node)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
    if isinstance(node, yaml.MappingNode):
        key = next((k for k, _ in node.value if getattr(k, "value", None) == loc[-1]), None)
        if key is not None:
            return key.start_mark.line + 1
    return parent


def load_requirements(path: str | Path) -> RequirementProfile:
    """Read and validate a profile; every problem at once, each with its line."""
    path = Path(path)
    data, root = read_yaml(path, "requirements", RequirementError)
    if not isinstance(data, dict):
        raise RequirementError([f"{path}:1: expected a mapping with groups {', '.join(GROUPS)}"])
    try:
        return RequirementProfile.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            where = ".".join(str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-")))
            line = line_of(root, loc) or 1
            message = describe_error(error)
            if error["type"] == "extra_forbidden":
                line = _key_line(root, loc) or line
                message = (f"unknown field (groups: {', '.join(GROUPS)}, and peak: {{tz, hours}}; a requirement has "
                           "require, name, weight, must)")  # fmt: skip
            lines.append(f"{path}:{line}: {where or 'requirements'}: {message}")
        raise RequirementError(lines) from None
