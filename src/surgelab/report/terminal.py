"""Terminal output: a live view while a run is under way and a final summary table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from surgelab.analysis.verdict import observed_text
from surgelab.metrics.live import LiveSnapshot
from surgelab.report.charts import terminal_chart
from surgelab.tablefit import fit_table
from surgelab.units import format_duration

if TYPE_CHECKING:
    from surgelab.report.model import ReportData

__all__ = ["LiveView", "render_snapshot", "summary_table", "print_summary", "timeline", "sweep_table", "failover_lines"]


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


def render_snapshot(s: LiveSnapshot) -> Panel:
    """One frame of the live view."""
    remaining = max(s.duration_s - s.elapsed_s, 0)
    table = Table.grid(padding=(0, 2))
    for _ in range(4):
        table.add_column()
    table.add_row("elapsed", format_duration(s.elapsed_s), "remaining", format_duration(remaining))
    table.add_row("target", s.target, "sending", f"{s.send_rate:.1f} req/s")
    table.add_row("in flight", str(s.in_flight), "completing", f"{s.completion_rate:.1f} req/s")
    table.add_row(
        "ok", f"{s.ok:,}", "errors", Text(f"{s.failed:,} ({s.error_rate:.1%})", style="red" if s.failed else "")
    )
    table.add_row("dropped", f"{s.dropped:,}", "cancelled", f"{s.cancelled:,}")
    table.add_row("TTFT p50/p99", f"{_ms(s.ttft_p50_ms)} / {_ms(s.ttft_p99_ms)}",
                  "E2E p50/p99", f"{_ms(s.e2e_p50_ms)} / {_ms(s.e2e_p99_ms)}")  # fmt: skip
    table.add_row("schedule lag p99", _ms(s.lag_p99_ms), "", "")
    return Panel(table, title="surgelab run", border_style="cyan")


class LiveView:
    """Redraws the latest snapshot in place on a terminal; silent elsewhere."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def update(self, snapshot: LiveSnapshot) -> None:
        if self._live is not None:
            self._live.update(render_snapshot(snapshot))


def summary_table(summary: dict[str, Any], width: int | None = None) -> Group:
    """The final summary as rich renderables (tests render it into a string console); at ``width``
    columns the latency table leaves out whole columns rather than cut its figures short."""
    req, thr = summary["requests"], summary["throughput"]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    fleet = summary.get("fleet")  # a simulation contacted nothing: its fleet instead of the URL
    where = f"SIMULATED fleet {fleet.get('name', '')}" if isinstance(fleet, dict) else summary["target"]["url"]
    head.add_row("run", f"{summary['name']} · {summary['mode']} loop · {where} · {summary['target']['model']}")
    if isinstance(fleet, dict):
        head.add_row("ended", f"{summary['stop_reason']} after {format_duration(summary.get('duration_s') or 0)} of "
                     f"simulated load (computed in {format_duration(summary['wall_s'] or 0)})")  # fmt: skip
    else:
        head.add_row("ended", f"{summary['stop_reason']} after {format_duration(summary['wall_s'] or 0)}")
    head.add_row("requests", f"{req['scheduled']:,} scheduled · {req['ok']:,} ok · {req['failed']:,} failed · "
                 f"{req['dropped']:,} dropped · {req['cancelled']:,} cancelled"
                 + (f" ({req['unanswered']:,} never answered)" if req.get("unanswered") else "")
                 + (f" · {req['lost']:,} lost with a worker" if req.get("lost") else "")
                 + f" (error rate {req['error_rate']:.2%})")  # fmt: skip
    for error in summary.get("errors") or []:  # what failed, in the target's words
        head.add_row("", Text(f"{error['count']:,} × {_error_text(error)}", style="red"))
    head.add_row("throughput", f"{thr['requests_per_s']:.2f} req/s · {thr['output_tokens_per_s']:,.0f} output tok/s · "
                 f"goodput {summary['goodput']['requests_per_s']:.2f} req/s")  # fmt: skip
    conc = summary["concurrency"]
    if conc["mean_in_flight"] is not None and conc["littles_law_estimate"] is not None:
        head.add_row(
            "in flight",
            f"{conc['mean_in_flight']:.2f} measured · {conc['littles_law_estimate']:.2f} by Little's Law (λ·W)",
        )

    # light borders and whole milliseconds past 100: the table fits 80 columns without splitting a row
    lat = Table(title="latency (ms) — from the intended send time, as users felt it", title_justify="left",
                box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    lat.add_column("metric", no_wrap=True)
    for col in ("mean", "p50", "p90", "p95", "p99", "max", "count"):
        lat.add_column(col, justify="right", no_wrap=True)
    rows = [(k.upper(), v) for k, v in summary["latency_ms"].items()]
    rows += [(f"{k.upper()} (service)", v) for k, v in summary["service_latency_ms"].items()]
    for name, d in rows:
        lat.add_row(name, *(_lat(d[k]) for k in ("mean", "p50", "p90", "p95", "p99", "max")), f"{d['count']:,}")
    fit_table(lat, width, ("max", "p95", "mean", "p90"))

    parts: list[Any] = [head, lat]
    censored = summary["latency_ms"]["e2e"].get("censored")
    if censored:
        parts.append(Text(f"TTFT and E2E count {censored:,} requests given up on as the time they waited (at least that long)",
                          style="yellow"))  # fmt: skip
    if summary.get("headline"):  # the verdict and its cause come first, before any figure
        parts.insert(0, Text(summary["headline"], style="bold red" if summary["headline"].startswith("FAIL") else "bold yellow"))
    lag = summary["schedule_lag_ms"]
    validity = summary["validity"]
    verdict = "[green]valid[/]" if validity["valid"] else "[red]INVALID[/]: " + "; ".join(validity["reasons"])
    parts.append(Text.from_markup(f"schedule lag p50 {_num(lag['p50'])} ms · p99 {_num(lag['p99'])} ms — {verdict}"))
    parts += [Text(line, style="yellow" if "never taken out" in line else "") for line in failover_lines(summary.get("failover"))]
    client_warning = (summary.get("client") or {}).get("warning")
    for warning in [*summary.get("warnings", []), *([client_warning] if client_warning else [])]:
        parts.append(Text(f"warning: {warning}", style="bold yellow"))
    for hint in summary.get("diagnosis", []):
        parts.append(Text(f"hint: {hint}", style="yellow"))
    parts += [Text(line) for line in agent_lines(summary)]
    for t in summary["thresholds"]:
        mark = "[green]✓ pass[/]" if t["passed"] else "[red]✗ FAIL[/]"
        default = " [dim](default bound)[/]" if t.get("default") else ""
        parts.append(Text.from_markup(f"{mark}  {t['expr']}{default}  (observed {observed_text(t)})"))
    return Group(*parts)


def agent_lines(summary: dict[str, Any]) -> list[str]:
    """The tools and agents blocks in a few lines: tasks, their time and SLO, each step; the calls made."""
    lines = []
    for name, block in (summary.get("agents") or {}).items():
        times, slo = block["task_s"], block.get("task_slo")
        line = (f"agent {name}: {block['tasks']:,} tasks · {block['completed']:,} completed · {block['failed']:,} failed · "
                f"{block['cut_short']:,} cut short by the phase's end · task p50 {_num(times['p50'])} s · p90 {_num(times['p90'])} s")  # fmt: skip
        if slo is not None and slo["fraction"] is not None:
            line += f" · within {slo['seconds']:g} s: {slo['fraction']:.0%}"
        lines.append(line)
        for step, s in block["steps"].items():
            lines.append(f"  step {step}: {s['requests']:,} req ({s['ok']:,} ok, {s['tool_calls']:,} tool calls) · "
                         f"E2E p50 {_lat(s['e2e_ms']['p50'])} ms · span p50 {_lat(s['span_ms']['p50'])} ms")  # fmt: skip
    tools = summary.get("tools")
    if tools:
        names = ", ".join(f"{n} {k:,}" for n, k in tools["by_name"].items()) or "none"
        first = tools["time_to_first_tool_call_ms"]["p50"]
        lines.append(f"tools: {tools['requests_offering_tools']:,} requests offered tools · {tools['answers_with_calls']:,} "
                     f"answers called ({names}) · first tool-call delta p50 {_lat(first)} ms")  # fmt: skip
    return lines


def failover_lines(block: dict[str, Any] | None) -> list[str]:
    """One line per switch-over of ``summary.json``'s ``failover``: when the target failed, when it last got a request."""
    if not block:
        return []
    bound = f" (bound {block['bound_s']:g} s)" if block["bound_s"] is not None else ""
    lines = []
    for s in block["switch_overs"]:
        last = f"{s['last_sent_s']:.1f} s" if s["last_sent_s"] is not None else "the end"
        if s["taken_out"]:
            lines.append(f"failover: {s['target']} failing from {s['first_failure_s']:.1f} s, taken out at {s['taken_out_s']:.1f} s, "
                         f"last request sent to it at {last}: switch-over {s['switch_over_s']:.1f} s{bound}")  # fmt: skip
        else:
            lines.append(f"failover: {s['target']} failing from {s['first_failure_s']:.1f} s and never taken out: requests "
                         f"sent to it until {last} ({s['failing_for_s']:.1f} s){bound}")  # fmt: skip
    if not lines and block["bound_s"] is not None:
        lines.append(f"failover: no target failed, nothing to switch over{bound}")
    return lines


def _error_text(error: dict[str, Any]) -> str:
    if error.get("message"):
        return error["message"]
    return error["state"] + (f" (HTTP {error['http_status']})" if error.get("http_status") else "")


def _lat(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def print_summary(summary: dict[str, Any], console: Console) -> None:
    console.print(summary_table(summary, console.width))


def timeline(data: ReportData) -> Group:
    """Throughput and TTFT P99 over the run, as terminal area charts (1 s windows)."""
    ts = data.timeseries
    ttft = [v or 0.0 for v in ts["ttft_ms"]["p99"]]
    return Group(
        Text("throughput (ok/s) over time", style="bold"),
        Text(terminal_chart(ts["throughput_per_s"], height=5, label="s")),
        Text("TTFT p99 (ms) over time", style="bold"),
        Text(terminal_chart(ttft, height=5, label="s")),
    )


def sweep_table(data: ReportData, width: int | None = None) -> Table:
    """A sweep directory's levels: offered load, throughput, P99 TTFT and E2E; the knee marked; a sparse
    P99 dimmed and starred in its own cell (the level's counts and rates read as they are)."""
    sweep = data.extensions["sweep"]
    knee = (sweep.get("knee") or {}).get("offered")
    table = Table(title=f"sweep {data.name} — {data.summary.get('stop_reason', '')}", title_justify="left")
    for name in (f"offered ({sweep.get('unit', '')})", "n", "req/s", "TTFT p99 ms", "E2E p99 ms", "errors", ""):
        table.add_column(name, justify="right", no_wrap=True)
    for p in sweep["points"]:
        star = "*" if p.get("sparse") else ""
        tail = "dim" if star else ""
        table.add_row(f"{p['offered']:g}", f"{p.get('measured', 0):,}", _num(p["throughput"]), Text(_num(p["ttft_p99_ms"]) + star, style=tail),
                      Text(_num(p["e2e_p99_ms"]) + star, style=tail), f"{p.get('error_rate') or 0:.1%}", "knee" if p["offered"] == knee else "")  # fmt: skip
    if any(p.get("sparse") for p in sweep["points"]):
        table.caption = f"* dim: P99 of fewer than {sweep.get('min_count_p99', 500)} requests (too few to read a P99)"
    return fit_table(table, width, ("errors", "n"))
