"""Sections beyond a single run: sweeps (``sweep.json``) and simulations (``simulation.json``).

The report model asks each reader in ``READERS`` for its section; a reader returns None when
its file is absent. ``surgelab sweep`` and ``surgelab simulate`` plug in here by adding or
refining a reader — the HTML page draws the documented shapes below.

* ``sweep``: ``{"points": [{"offered", "throughput", "ttft_p99_ms", "e2e_p99_ms", ...}],
  "knee": {"offered", "throughput"} | None, "slo_ms": {"ttft": .., "e2e": ..}, "plan": {...}}``
* ``fleet``: ``{"t": [...], "replicas": [...], "queue": [...], "shed": [...], "cost_per_hour": [...]}``
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["READERS", "extensions_for"]

Reader = Callable[[Path], "dict[str, Any] | None"]


def _pick(row: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if row.get(key) is not None:
            return row[key]
    return None


def _sweep(run_dir: Path) -> dict[str, Any] | None:
    """Best-effort reading of ``sweep.json`` into the ``sweep`` section."""
    path = run_dir / "sweep.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return None
    rows = data.get("points") or data.get("steps") or data.get("levels") or []
    points = []
    for row in rows:
        summary = row.get("summary") or {}
        lat = summary.get("latency_ms") or {}
        points.append({
            "offered": _pick(row, "offered", "rate", "level", "concurrency", "target"),
            "throughput": _pick(row, "throughput", "requests_per_s", "achieved")
            or (summary.get("throughput") or {}).get("requests_per_s"),
            "ttft_p99_ms": _pick(row, "ttft_p99_ms", "ttft_p99") or (lat.get("ttft") or {}).get("p99"),
            "e2e_p99_ms": _pick(row, "e2e_p99_ms", "e2e_p99") or (lat.get("e2e") or {}).get("p99"),
        })  # fmt: skip
    return {"points": points, "knee": data.get("knee"), "slo_ms": data.get("slo_ms") or data.get("slo"),
            "plan": data.get("plan")}  # fmt: skip


def _fleet(run_dir: Path) -> dict[str, Any] | None:
    for name in ("simulation.json", "fleet.json"):
        path = run_dir / name
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                return None
            return data.get("fleet", data) if isinstance(data, dict) else None
    return None


READERS: dict[str, Reader] = {"sweep": _sweep, "fleet": _fleet}


def extensions_for(run_dir: Path | str) -> dict[str, Any]:
    out = {}
    for name, reader in READERS.items():
        section = reader(Path(run_dir))
        if section is not None:
            out[name] = section
    return out
