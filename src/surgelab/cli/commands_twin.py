"""``surgelab fit`` and ``surgelab validate-twin``: measure one replica, model it, check the model."""

from __future__ import annotations

import os
from pathlib import Path

import typer
import yaml
from rich.console import Console
from rich.table import Table

from surgelab.cli import app
from surgelab.cli.common import fail, load_or_exit


def _base(spec: str | None):
    if spec is None:
        return None
    from surgelab.engine import ProfileError, load_profile

    try:
        return load_profile(spec)
    except ProfileError as exc:
        raise fail(str(exc)) from None


@app.command("fit")
def fit(
    runs: Path = typer.Argument(..., metavar="RUN|SWEEP", help="A run directory, or a sweep (any folder of runs)."),
    out: Path | None = typer.Option(None, help="Write the fitted profile here (YAML, for serve and simulate)."),
    base: str | None = typer.Option(None, help="A profile (name or file) for what the records cannot show (KV size)."),
    max_num_seqs: int | None = typer.Option(None, help="The server's running-batch limit, if you know it."),
) -> None:
    """Fit an engine profile's step-time coefficients to a real server's records, with uncertainties."""
    from surgelab.twin.fit import fit_profile

    try:
        result = fit_profile(runs, _base(base), running_max=max_num_seqs)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc)) from None
    console = Console()
    kinds = ("decode", "prefill", "mixed")
    structures = Table(title="step-time structures, fitted on 70 % of the observations and scored on the other 30 % "
                             "(median |relative error|)", title_justify="left")  # fmt: skip
    for col in ("structure", "terms", *kinds, "score", ""):
        structures.add_column(col, justify="left" if col in ("structure", "") else "right")
    for cand in result.candidates:
        errors = [f"{cand.held_out[k]:.2%}" if k in cand.held_out else "–" for k in (*kinds, "score")]
        structures.add_row(cand.structure, str(cand.terms), *errors, "chosen" if cand.chosen else "")
    if result.candidates:
        console.print(structures)
    console.print(f"structure: {result.reason}")
    table = Table(title=f"fitted from {runs} ({result.samples['decode_gaps']:,} decode gaps, "
                        f"{result.samples['idle_prefills']} idle prefills, {result.samples['mixed_steps']} mixed steps)",
                  title_justify="left")  # fmt: skip
    for col in ("coefficient", "value", "± (1 s.e.)", "relative", "source"):
        table.add_column(col, justify="right" if col not in ("coefficient", "source") else "left")
    for name, c in result.coefficients.items():
        rel = f"{c.relative_error:.1%}" if c.relative_error is not None else "–"
        table.add_row(name, f"{c.value:.4g}", f"{c.stderr:.2g}" if c.stderr is not None else "–", rel, c.source)
    table.add_row("combine", result.profile.combine, "", "", "chosen structure")
    table.add_row("max_num_seqs", str(result.profile.max_num_seqs), "", "", "")
    console.print(table)
    console.print("fit residual (relative RMS against bin medians, after dropping " f"{result.samples['trimmed']} outlying observations): "
                  + ", ".join(f"{k} {v:.1%}" for k, v in result.residual.items()))  # fmt: skip
    for note in result.notes:
        if note.startswith("WARNING "):
            console.print(f"[bold yellow]warning:[/] {note[len('WARNING '):]}")
        else:
            console.print(f"[yellow]note:[/] {note}")
    if out is not None:
        out.write_text(yaml.safe_dump({k: v for k, v in result.profile.to_dict().items() if k != "name"}, sort_keys=False))
        console.print(f"wrote {out} — use it with `surgelab serve --profile {out}` or a fleet's `profile:`")


@app.command("validate-twin")
def validate_twin_command(
    scenario_file: Path | None = typer.Argument(None, metavar="[SCENARIO]", help="A held-out scenario against the real server."),
    profile: str = typer.Option(..., help="The fitted profile (file or name)."),
    measured: Path | None = typer.Option(
        None, metavar="RUN", help="Instead of SCENARIO: a run measured earlier; only the simulation runs (another profile, no new load)."
    ),
    out: Path = typer.Option(Path("runs/twin-check"), help="Where the measured and simulated runs go."),
    p50_tolerance: float = typer.Option(0.15, help="Largest relative error allowed at P50 and on throughput."),
    p99_tolerance: float = typer.Option(0.25, help="Largest relative error allowed at P99."),
) -> None:
    """Run a held-out scenario for real and in the simulator with the fitted profile; report the errors.

    Each metric is within its tolerance, outside it, or undecided (the measured figure's own 95 %
    interval is wider than the miss). Exit 0 pass, 1 fail, 3 undecided.
    """
    from surgelab.metrics.rundir import RunDirError
    from surgelab.twin.validate import check_measured, validate_twin

    if (scenario_file is None) == (measured is None):
        raise fail("give a held-out SCENARIO to measure, or --measured RUN (an earlier run), not both")
    tolerances = {"p50_tolerance": p50_tolerance, "p99_tolerance": p99_tolerance}
    try:
        if measured is not None:
            check = check_measured(measured, _base(profile), out, **tolerances)
        else:
            scenario = load_or_exit(scenario_file, {})
            key = os.environ.get(scenario.target.api_key_env) if scenario.target.api_key_env else None
            check = validate_twin(scenario, _base(profile), out, api_key=key, **tolerances)
    except (ValueError, RunDirError) as exc:  # not a run to compare with; --out holding an earlier check
        raise fail(str(exc)) from None
    table = Table(title="digital twin: prediction against measurement", title_justify="left")
    for col in ("metric", "measured", "95% interval", "predicted", "error", "status"):
        table.add_column(col, justify="left" if col in ("metric", "status") else "right")
    styles = {"within": "green", "outside": "red", "undecided": "yellow"}
    for name, error in check.errors.items():
        m, p, status = check.measured[name], check.predicted[name], check.status[name]
        table.add_row(name, _figure(m), _interval(check.intervals.get(name)), _figure(p),
                      f"{error:+.1%}" if error is not None else "–", f"[{styles[status]}]{status}[/]")  # fmt: skip
    console = Console()
    console.print(table)
    if check.steps:
        steps = Table(title="its steps against the measured ones (medians; pure decode steps by sequences decoding)",
                      title_justify="left")  # fmt: skip
        for col in ("step", "samples", "measured ms", "profile ms", "error"):
            steps.add_column(col, justify="left" if col == "step" else "right")
        for s in check.steps:
            name = f"decode, {s['batch']} seq{'s' if s['batch'] > 1 else ''}" if s["kind"] == "decode" else s["kind"]
            steps.add_row(name, str(s["samples"]), f"{s['measured_ms']:,.1f}", f"{s['predicted_ms']:,.1f}", f"{s['error']:+.1%}")
        console.print(steps)
    verdict = {"pass": "[green]PASS[/]", "fail": "[red]FAIL[/]", "undecided": "[yellow]UNDECIDED[/]"}[check.verdict]
    console.print(f"{verdict} (P50 and throughput within {p50_tolerance:.0%}, P99 within {p99_tolerance:.0%}); "
                  f"runs in {out}")  # fmt: skip
    if check.verdict == "undecided":
        console.print("undecided: the prediction misses the tolerance but lies inside the measured figure's own 95 % "
                      "interval (or the percentile has too few requests): measure a longer held-out run")  # fmt: skip
    raise typer.Exit({"pass": 0, "fail": 1, "undecided": 3}[check.verdict])


def _figure(value: float | None) -> str:
    return f"{value:,.2f}" if value is not None else "–"


def _interval(bounds: list[float] | None) -> str:
    if not bounds:
        return "–"
    low, high = bounds
    return f"{_figure(low) if low > float('-inf') else '…'} – {_figure(high) if high < float('inf') else '…'}"
