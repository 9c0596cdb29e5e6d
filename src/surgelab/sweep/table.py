"""The sweep in the terminal: one row per level, the knee and the SLA capacity marked."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from surgelab.analysis.stats import min_count, sparse_percentile
from surgelab.sweep.result import LevelRow, SweepResult
from surgelab.tablefit import fit_table
from surgelab.units import format_rate

__all__ = ["sweep_table", "print_sweep", "level_line"]


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def level_line(row: LevelRow, unit: str) -> str:
    """One line per finished level, for progress output."""
    return (
        f"  {row.offered:g} {unit}: {format_rate(row.requests_per_s)} req/s, {row.output_tokens_per_s:,.0f} tok/s, "
        f"TTFT p99 {_ms(row.latency('ttft', 'p99'))} ms, errors {row.error_rate:.1%}"
        + ("" if row.valid else " [invalid: " + "; ".join(row.validity_reasons) + "]")
    )


DROP_FIRST = ("ITL\np50", "TTFT\np50", "in\nflight", "tok/s", "errors")  # at a narrow width, least needed first


def sweep_table(result: SweepResult, width: int | None = None) -> Table:
    """One row per level; at ``width`` columns, whole columns are left out rather than cells cut short."""
    knee_i = result.knee.get("row_index") if result.knee else None
    cap_i = result.sla_capacity["index"] if result.sla_capacity else None
    # light borders and two-line headers: ten columns fit 80 without splitting a cell
    table = Table(title=f"sweep {result.name} ({result.mode}, {result.unit})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    first = "users" if result.mode == "concurrency" else "offered"
    columns = (first, "req/s", "tok/s", "TTFT\np50", "TTFT\np99", "ITL\np50", "E2E\np99", "errors", "in\nflight", "")
    for col in columns:
        table.add_column(col, justify="right" if col else "left", no_wrap=True)
    for row in result.sorted_levels():
        marks = []
        if row.index == knee_i:
            marks.append("knee")
        if row.index == cap_i:
            marks.append("SLA")
        if not row.valid:
            marks.append("invalid")
        if row.stage == "refine":
            marks.append("refined")
        lat = row.latency
        table.add_row(
            f"{row.offered:g}",
            format_rate(row.requests_per_s),
            f"{row.output_tokens_per_s:,.0f}",
            _ms(lat("ttft", "p50")), _ms(lat("ttft", "p99")), _ms(lat("itl", "p50")), _ms(lat("e2e", "p99")),
            f"{row.error_rate:.1%}",
            "–" if row.mean_in_flight is None else f"{row.mean_in_flight:.1f}",
            ", ".join(marks),
        )  # fmt: skip
    table.caption = "latencies in ms; every column of every level is in sweep.json / sweep.parquet"
    return fit_table(table, width, DROP_FIRST)


def print_sweep(result: SweepResult, console: Console) -> None:
    console.print(sweep_table(result, console.width))
    console.print(f"stop: {result.stop_reason}", highlight=False)
    batch = result.batch_speedup()
    if len(batch) > 1:
        pairs = ", ".join(f"{b['level']:g} → {b['speedup']:.2f}× / {b['throughput_gain']:.2f}×" for b in batch)
        console.print(
            f"batch speedup (E2E P50 at {batch[0]['level']:g} ÷ at the level) / throughput gain: {pairs}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    console.print(f"knee: {result.knee.get('reason', 'not computed')}", highlight=False, soft_wrap=True)
    cap = result.sla_capacity
    if cap is None:
        rules = ", ".join(result.slo) or "no SLO set"
        console.print(f"SLA capacity: no level met {rules} with errors <= the limit", highlight=False)
    else:
        rules = ", ".join(cap["slo"]) or "no SLO set (errors only)"
        at = next((r for r in result.levels if r.index == cap["index"]), None)
        thin = (f" — [yellow]rests on a sparse tail: P99 of {at.measured:,} requests (needs {min_count(99):,})[/]"
                if at is not None and cap["slo"] and sparse_percentile(at.measured, 99) else "")  # fmt: skip
        console.print(
            f"SLA capacity: [bold]{format_rate(cap['requests_per_s'])} req/s[/] per instance at {cap['level']:g} {result.unit} "
            f"({rules}; errors <= {cap['max_error_rate']:.1%}){thin}",
            highlight=False,
        )
    b = result.breaking
    if b:
        rec = f"recovered {b['recovery_s']:.2f}s after the drop" if b["recovered"] else "did not recover in the window"
        ttft = "–" if b["ttft_p99_ms"] is None else f"{b['ttft_p99_ms']:,.0f} ms"
        console.print(
            f"breaking at {b['level']:g} {result.unit} ({b['multiple']:g} × {b['expected_peak']:g}): {b['mode']} — "
            f"errors {b['error_rate']:.1%}, TTFT p99 {ttft}, {format_rate(b['requests_per_s'])} req/s served; "
            f"back at {b['recovery_level']:g}: {rec}",
            highlight=False,
        )
