"""Plans in the terminal: the arithmetic, the cost–availability table, the M/M/c figures."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from surgelab.plan.capacity import CapacityPlan
from surgelab.plan.queueing import MMc
from surgelab.units import format_rate

__all__ = ["print_plan", "print_mmc"]


def _money(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def print_plan(plan: CapacityPlan, console: Console) -> None:
    fleet = plan.fleet
    inp = fleet.inputs
    console.print(
        f"per-instance SLA capacity: [bold]{format_rate(plan.capacity)} req/s[/] ({plan.capacity_source})", highlight=False
    )
    for line in fleet.arithmetic:
        console.print(f"  {line}", highlight=False)
    console.print(
        f"[bold]{fleet.total} instances[/] ({fleet.gpus} GPUs); headroom at the peak with {fleet.base}: "
        f"{fleet.headroom_at_peak:.0%} of their SLA capacity",
        highlight=False,
    )
    table = Table(
        title=f"cost vs availability: actual peak lognormal, mean {inp.peak:.4g} req/s, CV {inp.peak_cv:g}",
        title_justify="left",
    )
    for col in ("instances", "GPUs", "cost/month", "load at peak", "P(SLA holds)", "P(SLA holds, 1 down)", ""):
        table.add_column(col, justify="right" if col else "left")
    for row in fleet.table:
        mark = "planned" if row["instances"] == fleet.total else ("N" if row["instances"] == fleet.base else "")
        table.add_row(
            str(row["instances"]), str(row["gpus"]), _money(row["cost_per_month"]),
            f"{row['utilisation_at_peak']:.0%}", f"{row['p_sla']:.4f}", f"{row['p_sla_one_down']:.4f}", mark,
        )  # fmt: skip
    console.print(table)
    if plan.knee and plan.knee.get("reason"):
        console.print(f"knee: {plan.knee['reason']}", highlight=False, soft_wrap=True)
    m = plan.mmc
    if m:
        line = (
            f"M/M/c check: c = {m['servers']} slots (in flight at the knee), S = {m['service_time_s'] * 1000:.0f} ms "
            f"(mean E2E at the lowest level) → saturation c/S = {format_rate(m['predicted_saturation_rps'])} req/s; "
            f"measured plateau {format_rate(m['measured_plateau_rps'])} req/s ({m['departure']:+.0%})"
        )
        if m.get("predicted_wait_at_capacity_s") is not None and m.get("measured_wait_at_capacity_s") is not None:
            line += (
                f"; at the SLA capacity Erlang C predicts a mean wait of {m['predicted_wait_at_capacity_s'] * 1000:.0f} ms, "
                f"measured TTFT rise {m['measured_wait_at_capacity_s'] * 1000:.0f} ms"
            )
        console.print(line, highlight=False, soft_wrap=True)


def print_mmc(result: MMc, console: Console, target_wait: float | None = None) -> None:
    head = f"M/M/{result.servers}: λ = {result.rate:g} req/s, S = {result.service_time:g} s"
    if target_wait is not None:
        head = f"fewest servers with mean wait <= {target_wait:g} s: [bold]{result.servers}[/] — " + head
    console.print(head, highlight=False)
    console.print(
        f"  offered load a = λ·S = {result.offered_erlangs:.4g} Erlangs; utilisation ρ = a/c = {result.utilisation:.1%}",
        highlight=False,
    )
    if not result.stable:
        console.print(
            f"  unstable: ρ >= 1, the queue grows without bound (at least {int(result.offered_erlangs) + 1} servers needed)",
            highlight=False,
        )
        return
    console.print(
        f"  P(wait) = {result.p_wait:.4f}; mean wait Wq = {result.mean_wait * 1000:.1f} ms; "
        f"mean response W = {result.mean_response * 1000:.1f} ms; mean queue Lq = {result.mean_queue:.3g}",
        highlight=False,
    )
    console.print(f"  saturation throughput c/S = {result.saturation_rate:.4g} req/s", highlight=False)
