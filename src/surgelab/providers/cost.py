"""Cost: a token-priced API against a per-hour deployment, at the throughput actually measured.

Per million tokens, counting prompt and output tokens at the run's own mix:

* token-priced: (prompt tokens × input price + output tokens × output price) ÷ all tokens;
* per-hour: hourly price ÷ (measured tokens per second × 3,600) × 10⁶. This is the cost *at
  the load the run offered*: a run below saturation overstates it, so price a per-hour
  deployment from a run at its SLA capacity (a sweep level at the knee).

Break-even against a fleet sized by ``surgelab plan``: the fleet costs C per hour whatever it
serves, the API costs p per million tokens, so below C ÷ p million tokens per hour the API is
cheaper and above it the fleet — up to the fleet's own capacity (instances × SLA capacity ×
tokens per request), beyond which the fleet must grow.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from surgelab.scenario.model import Price

__all__ = ["TokenCost", "BreakEven", "cost_per_mtok", "break_even", "read_plan"]


@dataclass(frozen=True)
class TokenCost:
    """What a million tokens cost on one target, and how that was worked out."""

    target: str
    per_mtok: float | None
    tokens_per_s: float
    prompt_share: float  # prompt tokens ÷ all tokens in the run
    tokens_per_request: float
    how: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cost_per_mtok(target: str, price: Price | None, summary: dict[str, Any]) -> TokenCost:
    """Cost per million (prompt + output) tokens from a price and a run's summary."""
    tokens = summary.get("tokens") or {}
    prompt, output = float(tokens.get("prompt_total") or 0), float(tokens.get("output_total") or 0)
    total = prompt + output
    ok = float((summary.get("requests") or {}).get("ok") or 0)
    rate = float((summary.get("throughput") or {}).get("total_tokens_per_s") or 0.0)
    share = prompt / total if total else 0.0
    per_request = total / ok if ok else 0.0
    if price is None:
        return TokenCost(target, None, rate, share, per_request, "no price given for this target")
    parts, how = 0.0, []
    if price.input_per_mtok is not None or price.output_per_mtok is not None:
        blended = share * (price.input_per_mtok or 0.0) + (1 - share) * (price.output_per_mtok or 0.0)
        parts += blended
        how.append(f"tokens: {share:.0%} prompt at {price.input_per_mtok or 0:g} + {1 - share:.0%} output at "
                   f"{price.output_per_mtok or 0:g} = {blended:.4g}/Mtok")  # fmt: skip
    if price.per_hour is not None:
        if rate <= 0:
            return TokenCost(target, None, rate, share, per_request, "per-hour price but no tokens measured")
        hourly = price.per_hour / (rate * 3600.0) * 1e6
        parts += hourly
        how.append(
            f"instance: {price.per_hour:g}/h ÷ ({rate:.4g} tok/s × 3600) = {hourly:.4g}/Mtok at the measured load"
        )
    return TokenCost(target, parts, rate, share, per_request, "; ".join(how) or "price has no fields")


@dataclass(frozen=True)
class BreakEven:
    """Where a token-priced API and a per-hour fleet cost the same."""

    api_per_mtok: float
    fleet_per_hour: float
    fleet_instances: int
    mtok_per_hour: float | None  # break-even volume; None when the API is free
    fleet_capacity_mtok_per_hour: float | None
    tokens_per_request: float
    requests_per_day: float | None
    verdict: str
    arithmetic: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_plan(path: Path) -> dict[str, Any]:
    """``plan.json`` of ``surgelab plan --out`` (a directory or the file); ValueError if unusable."""
    file = path / "plan.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        fleet = data["fleet"]
        return {"instances": int(fleet["total"]), "capacity_rps": float(data["capacity"]), "gpus": int(fleet["gpus"]),
                "cost_per_hour": fleet.get("cost_per_hour")}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{file}: not a plan.json of `surgelab plan --out`: {exc}") from None


def break_even(
    api_per_mtok: float, fleet_per_hour: float, instances: int, tokens_per_request: float, capacity_rps: float | None
) -> BreakEven:
    """Volume (million tokens per hour) at which the API's bill equals the fleet's."""
    lines = [f"fleet: {instances} instance(s), {fleet_per_hour:.4g}/h whatever it serves",
             f"API: {api_per_mtok:.4g} per million tokens"]  # fmt: skip
    capacity = (
        capacity_rps * instances * tokens_per_request * 3600 / 1e6 if capacity_rps and tokens_per_request else None
    )
    if capacity is not None:
        lines.append(f"fleet capacity: {instances} × {capacity_rps:.4g} req/s × {tokens_per_request:.0f} tok/req × 3600 "
                     f"= {capacity:.4g} Mtok/h")  # fmt: skip
    if api_per_mtok <= 0:
        return BreakEven(api_per_mtok, fleet_per_hour, instances, None, capacity, tokens_per_request, None,
                         "the API costs nothing per token: it is always cheaper", lines)  # fmt: skip
    volume = fleet_per_hour / api_per_mtok
    lines.append(f"break-even: {fleet_per_hour:.4g}/h ÷ {api_per_mtok:.4g}/Mtok = {volume:.4g} Mtok/h")
    per_day = volume * 1e6 * 24 / tokens_per_request if tokens_per_request else None
    if capacity is not None and volume > capacity:
        verdict = (f"the API is cheaper at every volume this fleet can serve (break-even {volume:.4g} Mtok/h "
                   f"is beyond its {capacity:.4g} Mtok/h)")  # fmt: skip
    else:
        verdict = f"below {volume:.4g} Mtok/h the API is cheaper; above it the fleet"
    return BreakEven(
        api_per_mtok, fleet_per_hour, instances, volume, capacity, tokens_per_request, per_day, verdict, lines
    )
