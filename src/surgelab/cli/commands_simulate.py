"""``surgelab simulate``: the scenario's schedule on one or more simulated fleets."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from surgelab.cli import app
from surgelab.cli.common import fail, inputs_or_exit, load_or_exit, warn


@app.command("simulate")
def simulate_command(
    scenario_file: Path = typer.Argument(..., metavar="SCENARIO"),
    fleet_files: list[Path] = typer.Option(
        ..., "--fleet", help="Fleet file (YAML); repeat to compare schemes on the same schedule."
    ),
    out: Path | None = typer.Option(None, "--out", help="Run directory (one per fleet below it when comparing)."),
) -> None:
    """Simulate the scenario on a fleet of engine replicas in virtual time; same records and summary as a real run."""
    from surgelab.metrics.rundir import RunDirError, write_json
    from surgelab.report.compare import compare_runs
    from surgelab.report.outputs import HtmlOutput, finalize_run
    from surgelab.report.terminal import agent_lines
    from surgelab.sim import FleetError, comparison_rows, load_fleet, simulate
    from surgelab.sim.loader import fleet_context_warnings

    scenario = load_or_exit(scenario_file, {})
    inputs_or_exit(scenario, scenario_file, warn)
    fleets = []
    for path in fleet_files:
        try:
            fleets.append(load_fleet(path))
        except FleetError as exc:
            raise fail(str(exc)) from None
    for warning in (w for fleet in fleets for w in fleet_context_warnings(scenario, fleet)):
        warn(f"warning: {warning}")
    names = [f.name for f in fleets]
    if len(set(names)) != len(names):
        raise fail(f"--fleet: fleet names must differ to compare them, got {names}")
    base = out or Path("runs") / f"sim-{scenario.name}-{datetime.now():%Y%m%d-%H%M%S}"
    console = Console()
    results = []
    for fleet in fleets:
        run_dir = base if len(fleets) == 1 else base / fleet.name
        try:
            result = simulate(scenario, fleet, run_dir)
        except RunDirError as exc:
            raise fail(str(exc)) from None
        console.print(
            f"simulated {fleet.name}: {result.fleet['events']:,} events in {result.fleet['wall_s']:.1f} s → {run_dir}"
        )
        if result.stop_reason != "completed":  # a stop rule held, as it would have in a measured run
            stopped_at = result.summary["window"]["end_s"]
            console.print(f"  stopped at {stopped_at:g} s: {result.stop_reason}", highlight=False, markup=False, soft_wrap=True)
        for pool, bar in result.fleet.get("model_error", {}).items():
            console.print(f"  engine model of pool {pool}: {bar['text']}", highlight=False, soft_wrap=True)
        results.append(result)
    rows = comparison_rows(results)
    for result in results:  # every simulated run gets its report, like a measured one
        finalize_run(result.run_dir, console)
    if len(fleets) > 1:
        write_json(base / "comparison.json", {"scenario": scenario.name, "fleets": rows})
        data = compare_runs([r.run_dir for r in results])  # the same report as comparing measured runs
        HtmlOutput(base / "compare.html").finalize(data)
        console.print(f"comparison report: {base / 'compare.html'}", highlight=False)
    console.print(_table(rows, results))
    for result in results:
        for line in agent_lines(result.summary):  # per task and per step, as a measured run prints them
            console.print(line if len(results) == 1 else f"{result.fleet['name']}: {line}", highlight=False, soft_wrap=True)
        for cache in result.fleet.get("caches", ()):
            if cache["warning"]:
                console.print(f"warning: {result.fleet['name']}: {cache['warning']}", style="yellow", highlight=False)


def _fmt(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _cache_cell(result) -> str:
    caches = result.fleet.get("caches") or []
    if not caches:
        return "–"
    c = caches[0]
    rate = "–" if c["hit_rate"] is None else f"{c['hit_rate']:.1%}"
    memory = "–" if c["memory_gb"] is None else f"{c['memory_gb']:.1f} GB"
    traded = "" if c["sequences_traded"] is None else f" = {c['sequences_traded']:,} seqs"
    return f"{rate}, {memory}{traded}"


def _table(rows: list[dict], results: list | None = None) -> Table:
    table = Table(title="fleets on the same schedule")
    table.add_column("")
    for row in rows:
        table.add_column(row["fleet"], justify="right")
    lines = [
        ("SLA violations", lambda r: f"{r['sla_violations']:,} / {r['measured']:,}"),
        ("P99 TTFT ms", lambda r: _fmt(r["p99_ttft_ms"])),
        ("P99 E2E ms", lambda r: _fmt(r["p99_e2e_ms"])),
        ("shed", lambda r: f"{r['shed']:,}"),
        ("lost", lambda r: f"{r['lost']:,}"),
        ("avg instances", lambda r: _fmt(r["average_instances"], 2)),
        ("replica-hours", lambda r: _fmt(r["replica_hours"], 3)),
        ("cost", lambda r: _fmt(r["cost"], 2)),
    ]
    for label, cell in lines:
        table.add_row(label, *(cell(r) for r in rows))
    if results and any(r.fleet.get("caches") for r in results):
        table.add_row("cache hit, memory", *(_cache_cell(r) for r in results))
    return table
