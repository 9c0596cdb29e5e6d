"""summary.json from a run directory: one finisher for measured and simulated runs.

``surgelab run``, ``surgelab simulate`` and ``surgelab summarize`` all end here, so a summary
rebuilt from the directory is the one the run wrote: the figures (``analysis.summary``), the
run's context from run.json, memory trends, telemetry and diagnosis, and a simulation's
``fleet`` block from its ``fleet.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from surgelab.analysis.summary import RunInfo, leak_warnings, summarize
from surgelab.analysis.trend import memory_trends
from surgelab.load.inputs import skipped_warnings
from surgelab.metrics.rundir import add_run_context, read_json, write_summary_file
from surgelab.metrics.store import merge_parts, merge_table_parts, read_table_parts, return_freed_memory
from surgelab.scenario.model import Scenario
from surgelab.telemetry.derive import memory_series, summarize_telemetry
from surgelab.telemetry.diagnose import attach_telemetry
from surgelab.telemetry.samples import TELEMETRY_SCHEMA

__all__ = ["FLEET_FILE", "FLEET_KEYS", "finish_summary"]

FLEET_FILE = "fleet.json"
FLEET_KEYS = ("name", "average_instances", "replica_hours", "cost", "shed", "lost", "sla_violations", "cache_hit_rate")
"""What a simulation's summary reports of its fleet.json (and ``caches`` where the fleet has them)."""


def finish_summary(
    scenario: Scenario, run_dir: Path, info: dict[str, Any], records: pa.Table | None = None
) -> dict[str, Any]:
    """Summarise the run directory (or ``records``, its records already in memory) and write ``summary.json``.

    Records (and telemetry) parts are merged first. ``info`` is run.json: after a crash it has no
    stop facts, and the records say how far the run got.
    """
    run_dir = Path(run_dir)
    if records is None:
        return_freed_memory()  # a long run's records are read column by column: keep the peak to what is in use
        merge_parts(run_dir)
    summary = summarize(run_dir if records is None else records, scenario, RunInfo.from_dict(info))
    add_run_context(summary, info)
    if info.get("simulated"):  # virtual time: no client, no server to scrape; the fleet's report instead
        summary["fleet"] = _fleet_block(read_json(run_dir / FLEET_FILE))
    else:
        _add_measured(summary, scenario, run_dir, info)
    write_summary_file(run_dir, summary)
    return summary


def _add_measured(summary: dict[str, Any], scenario: Scenario, run_dir: Path, info: dict[str, Any]) -> None:
    """What only a measured run has: telemetry, memory trends, the inputs' skipped rows, the diagnosis."""
    telemetry, servers = {}, {}
    if (run_dir / "telemetry.parts").is_dir() or (run_dir / "telemetry.parquet").is_file():
        merge_table_parts(run_dir, "telemetry", TELEMETRY_SCHEMA, "seq")
        table = read_table_parts(run_dir, "telemetry", TELEMETRY_SCHEMA, "seq")
        end = info.get("stopped_at_s") or summary["duration_s"] + info.get("window_start_s", 0.0)
        telemetry = summarize_telemetry(table, info.get("window_start_s", 0.0), end)
        servers = memory_series(table)
    memory = memory_trends(info.get("cpu"), servers)
    summary["trends"].update(memory)
    summary["warnings"] += leak_warnings(memory) + skipped_warnings(info.get("inputs"))
    attach_telemetry(summary, telemetry, scenario.telemetry.capacity)


def _fleet_block(report: dict[str, Any]) -> dict[str, Any]:
    block = {k: report[k] for k in FLEET_KEYS}
    if "caches" in report:
        block["caches"] = report["caches"]
    return block
