"""The files a scenario reads rows from — replayed traces, datasets, empirical distributions — and
what each left out, so that no bad row is dropped without a word.

Read once per process (the readers cache), before anything is sent: a file that cannot be used
is an ``InputError`` naming the scenario field, and every file's skipped rows are counted, said
before the load (``surgelab validate`` and ``run``), and kept in run.json and summary.json
(``inputs``, and a warning).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from surgelab.scenario.distributions import Empirical
from surgelab.scenario.model import Scenario
from surgelab.scenario.shapes import Replay
from surgelab.scenario.workload import Dataset
from surgelab.traces import Trace, TraceError

__all__ = ["InputError", "input_report", "skipped_warnings"]

_LINES_KEPT = 10  # of the skipped rows' lines, in run.json: enough to find them, bounded however many


class InputError(ValueError):
    """A file the scenario reads rows from cannot be used: ``FIELD: FILE[:LINE]: what was expected``."""


def _readers(node: Any, where: str) -> Iterator[tuple[str, Replay | Dataset | Empirical]]:
    """Every part of the scenario that reads a file, with its field path, in the order written."""
    if isinstance(node, (Replay, Dataset)) or (isinstance(node, Empirical) and node.file is not None):
        yield where, node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _readers(getattr(node, name), f"{where}.{name}" if where else name)
    elif isinstance(node, (list, tuple)):
        for k, item in enumerate(node):
            yield from _readers(item, f"{where}[{k}]")
    elif isinstance(node, dict):
        for key, item in node.items():
            yield from _readers(item, f"{where}.{key}")


def _entry(field: str, trace: Trace) -> dict[str, Any]:
    skipped = trace.skipped
    entry: dict[str, Any] = {"field": field, "file": str(trace.source), "format": trace.format, "rows": len(trace),
                             "skipped": len(skipped), "skipped_lines": [p.line for p in skipped[:_LINES_KEPT]]}  # fmt: skip
    if skipped:
        entry["first_skipped"] = {"line": skipped[0].line, "why": skipped[0].message}
    return entry


def input_report(scenario: Scenario) -> list[dict[str, Any]]:
    """One entry per file read (the first field that reads it names it): rows used, rows skipped, the first's why."""
    report, seen = [], set()
    for field, reader in _readers(scenario, ""):
        try:
            trace = reader.read()
        except TraceError as exc:
            raise InputError(f"{field}: {exc}") from None
        key = (str(trace.source), trace.format, len(trace), len(trace.skipped))
        if key not in seen:
            seen.add(key)
            report.append(_entry(field, trace))
    return report


def skipped_warnings(report: list[dict[str, Any]] | None) -> list[str]:
    """One sentence per file that had rows left out: how many, where, and the first one's why."""
    warnings = []
    for entry in report or []:
        if not entry["skipped"]:
            continue
        lines = entry["skipped_lines"]
        where = ("lines " if len(lines) > 1 else "line ") + ", ".join(map(str, lines))
        if entry["skipped"] > len(lines):
            where += f" and {entry['skipped'] - len(lines):,} more"
        first = entry["first_skipped"]
        warnings.append(
            f"{entry['field']}: {Path(entry['file']).name}: {entry['skipped']:,} of {entry['rows'] + entry['skipped']:,} "
            f"rows skipped as bad ({where}); the first, line {first['line']}: {first['why']}"
        )
    return warnings
