"""Output formats as peers: each takes the one result model and ``finalize``s it.

``TerminalOutput`` prints, ``JsonOutput`` writes the model as JSON, ``HtmlOutput`` writes the
self-contained page. They read the same ``ReportData`` (a run) or ``CompareData`` (a
comparison) and never compute figures of their own.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from surgelab.files import located, os_error_line, write_atomic
from surgelab.report.compare import CompareData
from surgelab.report.compare_view import compare_table, render_compare_html
from surgelab.report.html import REPORT_FILE, render_html
from surgelab.report.model import ReportData, build_report_data
from surgelab.report.terminal import print_summary, sweep_table, timeline

__all__ = ["TerminalOutput", "JsonOutput", "HtmlOutput", "write_run_report", "write_level_reports", "finalize_run"]

Result = ReportData | CompareData


def _write(path: Path, text: str) -> Path:
    """Whole or absent: no ``.tmp`` is left behind; an OSError names ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise located(exc, path.parent) from None
    return write_atomic(path, text)


class TerminalOutput:
    def __init__(self, console: Console) -> None:
        self.console = console

    def finalize(self, result: Result) -> None:
        if isinstance(result, CompareData):
            self.console.print(compare_table(result, self.console.width))
            return
        if result.kind == "sweep":
            self.console.print(sweep_table(result, self.console.width))
            return
        print_summary(result.summary, self.console)
        self.console.print(timeline(result))


class JsonOutput:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def finalize(self, result: Result) -> Path:
        return _write(self.path, result.to_json())


class HtmlOutput:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def finalize(self, result: Result) -> Path:
        if isinstance(result, CompareData):
            return _write(self.path, render_compare_html(result))
        return _write(self.path, render_html(result))


def write_run_report(run_dir: Path | str) -> Path:
    """``report.html`` in a run directory, from its records and summary."""
    run_dir = Path(run_dir)
    return HtmlOutput(run_dir / REPORT_FILE).finalize(build_report_data(run_dir))


def write_level_reports(data: ReportData) -> int:
    """A sweep's levels are runs of their own: each gets its ``report.html`` (the sweep page links them)."""
    if data.kind != "sweep":
        return 0
    written = 0
    for point in data.extensions["sweep"]["points"]:
        level = Path(data.run_dir) / (point.get("run_dir") or "")
        if point.get("run_dir") and (level / "summary.json").exists() and not (level / REPORT_FILE).exists():
            write_run_report(level)
            written += 1
    return written


def finalize_run(run_dir: Path | str, console: Console) -> Path | None:
    """Write ``report.html`` at the end of a run; a report problem never fails the run."""
    try:
        return write_run_report(run_dir)
    except Exception as exc:  # the records and summary are already safe on disk
        why = os_error_line(exc) if isinstance(exc, OSError) else str(exc).splitlines()[0] if str(exc) else repr(exc)
        console.print(
            f"[yellow]warning:[/] report.html not written: {escape(why)} (retry with `surgelab report {escape(str(run_dir))}`)",
            highlight=False, soft_wrap=True, markup=True,
        )  # fmt: skip
        return None
