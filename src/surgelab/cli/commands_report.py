"""``surgelab report``, ``show`` and ``compare``: looking at run directories after the fact."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from surgelab.cli import app
from surgelab.cli.common import fail


def _run_dir(path: Path) -> Path:
    if not (path / "summary.json").exists() and not (path / "sweep.json").exists():
        raise fail(f"{path}: not a run directory (no summary.json; `surgelab summarize` rebuilds it after a crash)")
    return path


def _one_run(path: Path) -> Path:
    """A run directory to compare; a sweep directory is named as one, with its levels (the runs it holds)."""
    if (path / "sweep.json").exists() and not (path / "summary.json").exists():
        levels = " ".join(str(p) for p in sorted(path.glob("level-*")) if (p / "summary.json").exists())
        raise fail(f"{path}: a sweep directory, not a run: compare its levels (surgelab compare {levels}), "
                   f"or see the sweep with surgelab report {path}")  # fmt: skip
    return _run_dir(path)


@app.command("report")
def report(
    run_dir: Path = typer.Argument(..., metavar="RUN", help="Run directory."),
    out: Path | None = typer.Option(None, help="Where to write the HTML (default: RUN/report.html)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the report model as JSON here."),
) -> None:
    """Rebuild a run's (or a sweep directory's) self-contained HTML report: charts embedded, works offline."""
    from surgelab.files import os_error_line
    from surgelab.report.html import REPORT_FILE
    from surgelab.report.model import build_report_data
    from surgelab.report.outputs import HtmlOutput, JsonOutput, write_level_reports

    data = build_report_data(_run_dir(run_dir))
    try:
        path = HtmlOutput(out or run_dir / REPORT_FILE).finalize(data)
        if json_out is not None:
            JsonOutput(json_out).finalize(data)
        levels = write_level_reports(data)
    except OSError as exc:
        raise fail(f"report not written: {os_error_line(exc, 'or give --out a path you can write to', out)}") from None
    print(f"report: {path}" + (f" (and the report of each of its {levels} levels)" if levels else ""))


@app.command("show")
def show(run_dir: Path = typer.Argument(..., metavar="RUN", help="Run directory.")) -> None:
    """Print the summary of a past run in the terminal."""
    from surgelab.report.model import build_report_data
    from surgelab.report.outputs import TerminalOutput

    TerminalOutput(Console()).finalize(build_report_data(_run_dir(run_dir)))


@app.command("compare")
def compare(
    runs: list[Path] = typer.Argument(..., metavar="RUN RUN [RUN...]", help="Run directories; the first is the baseline."),
    out: Path | None = typer.Option(
        None, help="Directory for compare.html and compare.json (created), or an .html file; default: the current directory."
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Write the comparison model as JSON here (with --out DIR: DIR/compare.json)."),
    resamples: int = typer.Option(1000, min=100, help="Bootstrap resamples per run."),
    seed: int = typer.Option(0, help="Seed of the bootstrap."),
    min_effect: float = typer.Option(0.05, min=0.0, help="Smallest relative difference called significant."),
) -> None:
    """Compare runs: differences with bootstrap 95% CIs and a verdict per metric, in the terminal and as HTML."""
    from surgelab.report.compare import compare_runs
    from surgelab.report.outputs import HtmlOutput, JsonOutput, TerminalOutput

    if len(runs) < 2:
        raise fail("compare needs at least two run directories")
    from surgelab.files import os_error_line

    html, json_path = Path("compare.html"), json_out
    if out is not None and out.suffix.lower() in (".html", ".htm"):
        html = out
    elif out is not None:
        html, json_path = out / "compare.html", json_out or out / "compare.json"
    data = compare_runs([_one_run(r) for r in runs], seed=seed, resamples=resamples, min_effect=min_effect)
    TerminalOutput(Console()).finalize(data)
    try:
        path = HtmlOutput(html).finalize(data)
        if json_path is not None:
            JsonOutput(json_path).finalize(data)
    except OSError as exc:
        raise fail(f"comparison not written: {os_error_line(exc, 'or give --out a directory you can write to', html)}") from None
    print(f"comparison report: {path}" + (f" · {json_path}" if json_path is not None else ""))
