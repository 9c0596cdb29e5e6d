"""What a run's report reads beside its records, and the sentence it says in red when it cannot.

A report never fails because an input no longer loads, and never shows less without a word:
each reader here returns what it could read and appends to ``problems`` what it left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from surgelab.metrics.rundir import REDACTED
from surgelab.report.extensions import Unreadable, why
from surgelab.report.server_latency import server_latency
from surgelab.report.telemetry import telemetry_series
from surgelab.scenario import Scenario, load_scenario
from surgelab.scenario.loader import build_scenario

__all__ = ["load_stored_scenario", "telemetry_or_problem"]


def load_stored_scenario(run_dir: Path, problems: list[str]) -> Scenario | None:
    """The stored scenario; one that no longer loads leaves out what it alone knows, and the page says so."""
    path = run_dir / "scenario.yaml"
    if not path.exists():
        problems.append("scenario.yaml is missing: the planned load (target line) and the SLO section are left out")
        return None
    try:
        return load_scenario(path)
    except Exception as exc:  # a report never fails because the scenario no longer loads
        first = why(exc)
    recovered = _without_redacted(path)
    if recovered is not None:  # a run stored before the redactor took settings for secrets (images.tokens)
        scenario, fields = recovered
        problems.append(f"scenario.yaml does not load as stored ({first}): read without its redacted fields "
                        f"({', '.join(fields)}), which take their defaults")  # fmt: skip
        return scenario
    problems.append(
        f"scenario.yaml does not load ({first}): the planned load (target line) and the SLO section are left out"
    )
    return None


def _without_redacted(path: Path) -> tuple[Scenario, list[str]] | None:
    """The stored scenario with every ``<redacted>`` value dropped, and their dotted names; None if it still fails."""
    dropped: list[str] = []

    def keep(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if v == REDACTED:
                    dropped.append(f"{where}{k}")
                else:
                    out[k] = keep(v, f"{where}{k}.")
            return out
        return [keep(v, f"{where}{i}.") for i, v in enumerate(value)] if isinstance(value, list) else value

    try:
        data = keep(yaml.safe_load(path.read_text(encoding="utf-8")), "")
        return (build_scenario(data, source=str(path), base_dir=path.parent), dropped) if dropped else None
    except Exception:  # unreadable either way: the caller says what is left out
        return None


def server_latency_or_problem(run_dir: Path, client_s: dict[str, Any], problems: list[str]) -> dict[str, Any] | None:
    """``server_latency``; a telemetry.parquet that cannot be read is one sentence in ``problems``, not two."""
    try:
        return server_latency(run_dir, client_s)
    except Unreadable as exc:
        if not any(p.startswith("telemetry.parquet cannot be read") for p in problems):
            problems.append(str(exc))
        return None


def telemetry_or_problem(run_dir: Path, span: float, problems: list[str]) -> dict[str, Any] | None:
    """``telemetry_series``; a telemetry.parquet that cannot be read is a sentence in ``problems``."""
    try:
        return telemetry_series(run_dir, span)
    except Unreadable as exc:
        problems.append(str(exc))
        return None
