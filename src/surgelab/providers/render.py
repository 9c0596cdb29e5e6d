"""Terminal views of scores, probes, history and cost (rich), kept apart from the arithmetic."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.console import Console
from rich.table import Table

from surgelab.providers.cost import BreakEven, TokenCost
from surgelab.providers.probe_result import ProbeResult
from surgelab.providers.score import Scorecard
from surgelab.providers.trends import HistoryReport

__all__ = ["print_scorecard", "print_probe", "print_history", "print_costs", "print_break_even"]

_GROUP = {"core_performance": "core performance", "business_fit": "business fit",
          "architecture_compatibility": "architecture", "commercial": "commercial"}  # fmt: skip


def print_scorecard(card: Scorecard, console: Console) -> None:
    table = Table(title=f"requirements: {card.profile.name}", title_justify="left")
    for col in ("group", "requirement", "weight"):
        table.add_column(col, justify="right" if col == "weight" else "left")
    for target in card.targets:
        table.add_column(target, justify="center")
    for i, r in enumerate(card.profile.requirements()):
        cells = []
        for target in card.targets:
            v = card.verdict(target, i)
            got = "no data" if v.evidence == "none" else "" if r.unit == "pass" else v.shown()
            tag = " [dim](declared)[/]" if v.evidence == "declared" else ""
            cells.append((f"[green]pass[/] {got}" if v.passed else f"[red]FAIL[/] {got}") + tag)
        table.add_row(_GROUP[r.group], r.label + (" (must)" if r.must else ""), f"{r.weight:g}", *cells)
    console.print(table)
    kinds = [v.evidence for v in card.verdicts]
    console.print(
        f"{kinds.count('measured')} verdicts rest on measurements, {kinds.count('declared')} on what a provider "
        f"declared (marked), {kinds.count('none')} on nothing",
        highlight=False,
    )
    ranking = Table(title="weighted ranking", title_justify="left")
    for col in ("#", "target", "score", "passed weight", "qualified"):
        ranking.add_column(col, justify="left" if col in ("target", "qualified") else "right")
    for place, rank in enumerate(card.ranking, 1):
        qualified = "yes" if rank.qualified else f"[red]no[/]: failed {', '.join(rank.failed_musts)}"
        ranking.add_row(
            str(place), rank.target, f"{rank.score:.0%}", f"{rank.passed_weight:g} / {rank.total_weight:g}", qualified
        )
    console.print(ranking)
    for target, runs in card.quota_limited.items():
        console.print(
            f"[yellow]{target} was limited by its provider's quota, not its speed[/] — its latency figures describe "
            "a throttled service; raise the quota or lower the load to judge its speed:",
            highlight=False,
            soft_wrap=True,
        )
        for run in runs:
            console.print(f"  {run}", highlight=False, soft_wrap=True, markup=False)
    failures = card.failures()
    if failures:
        console.print("why each failure:", highlight=False)
        for v in failures:
            console.print(f"  {v.explain()}", highlight=False, soft_wrap=True, markup=False)


def print_probe(result: ProbeResult, console: Console) -> None:
    mark = "[red]?[/]" if result.value is None else "[green]•[/]"
    console.print(f"{mark} [bold]{result.name}[/] ({result.metric}): {result.found}", highlight=False, soft_wrap=True)
    console.print(f"    how: {result.how}", highlight=False, soft_wrap=True, markup=False)
    for check in result.details.get("checks", []):
        if not check["passed"]:
            console.print(
                f"    failed: {check['check']} — {check['detail']}", highlight=False, soft_wrap=True, markup=False
            )


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def print_history(report: HistoryReport, console: Console) -> None:
    as_of = datetime.fromtimestamp(report.as_of, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    console.print(f"history as of {as_of}, window {report.days:g} days, hours in {report.tz}; "
                  f"peak {report.peak[0]}–{report.peak[1]} h marked *", highlight=False)  # fmt: skip
    hours = Table(title="E2E P90 by hour of day (median of rounds, ms)", title_justify="left")
    hours.add_column("hour")
    for t in report.targets:
        hours.add_column(t.target, justify="right")
    for h in range(24):
        if not any(t.hours[h].samples for t in report.targets):
            continue
        label = f"{h:02d}{' *' if report.peak[0] <= h < report.peak[1] else ''}"
        cells = [_ms(t.hours[h].p90_median_ms) for t in report.targets]
        hours.add_row(f"[bold yellow]{label}[/]" if "*" in label else label, *cells)
    console.print(hours)
    table = Table(title="per target", title_justify="left")
    for col in (
        "target",
        "rounds",
        "volatility (CV)",
        "mean tok/s",
        "error rate",
        "peak P90 (worst day)",
        "vs previous week",
    ):
        table.add_column(col, justify="left" if col in ("target", "vs previous week") else "right")
    for t in report.targets:
        changes = ", ".join(
            f"{'[red]' if c.regressed else ''}{c.metric} {c.change:+.0%}{'[/]' if c.regressed else ''}"
            for c in t.changes if c.change is not None
        ) or "no previous week"  # fmt: skip
        table.add_row(
            t.target, str(t.samples), "–" if t.volatility is None else f"{t.volatility:.1%}",
            "–" if t.throughput_mean is None else f"{t.throughput_mean:,.1f}",
            "–" if t.error_rate is None else f"{t.error_rate:.2%}",
            "–" if t.peak_p90_ms is None else f"{t.peak_p90_ms:,.0f} ms ({t.peak_day})", changes,
        )  # fmt: skip
    console.print(table)
    for t in report.targets:
        for c in t.regressions:
            console.print(f"[red]regression[/] {t.target}: {c.metric} {c.previous:.4g} → {c.this_window:.4g} ({c.change:+.0%})",
                          highlight=False)  # fmt: skip


def print_costs(costs: list[TokenCost], console: Console) -> None:
    table = Table(title="cost per million tokens (prompt + output) at the measured throughput", title_justify="left")
    for col in ("target", "per Mtok", "tokens/s measured", "prompt share", "how"):
        table.add_column(col, justify="left" if col in ("target", "how") else "right")
    for c in costs:
        table.add_row(c.target, "–" if c.per_mtok is None else f"{c.per_mtok:.4g}", f"{c.tokens_per_s:,.0f}",
                      f"{c.prompt_share:.0%}", c.how)  # fmt: skip
    console.print(table)


def print_break_even(name: str, fleet: str, result: BreakEven, console: Console) -> None:
    console.print(f"[bold]break-even[/] {name} (per token) vs {fleet} (per hour):", highlight=False)
    for line in result.arithmetic:
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    if result.requests_per_day is not None:
        console.print(
            f"  = {result.requests_per_day:,.0f} requests/day at {result.tokens_per_request:.0f} tokens each",
            highlight=False,
        )
    console.print(f"  {result.verdict}", highlight=False, soft_wrap=True)
