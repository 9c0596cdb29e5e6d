"""The client's headroom: this machine's measured load-generation ceiling, read when a run starts.

``surgelab calibrate`` (``sweep/calibrate.py``) measures the ceiling and caches it per machine,
surgelab version and worker count. Every run looks it up once, at its start, and records the
planned peak as a share of it in ``run.json`` (``client``); the summary reports that block as
it was recorded, so a run summarised on another machine, or after a new calibration, says the
same. A result that is the client's limit rather than the server's is flagged.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from surgelab import __version__
from surgelab.scenario.model import Scenario

__all__ = ["cache_path", "load_calibration", "save_calibration", "client_headroom", "unrecorded_headroom", "WARN_SHARE"]

WARN_SHARE = 0.7  # above this share of the ceiling the client may be what limits the result


def _machine() -> str:
    return f"{socket.gethostname()}|{platform.machine()}|{os.cpu_count()}cpu"


def cache_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "surgelab" / "calibration.json"


def _key(workers: int) -> str:
    return f"{_machine()}|surgelab {__version__}|lean server|workers={workers}"  # earlier figures used a slower server


def load_calibration(workers: int = 1) -> dict[str, Any] | None:
    try:
        return json.loads(cache_path().read_text()).get(_key(workers))
    except (OSError, ValueError):
        return None


def save_calibration(workers: int, ceiling: float, levels: Sequence[Any]) -> dict[str, Any]:
    """Cache a measured ceiling and its levels (``sweep.calibrate.Level``) for this machine and ``workers``."""
    path = cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    entry = {
        "ceiling_rps": ceiling, "workers": workers, "measured_at": datetime.now(timezone.utc).isoformat(),
        "levels": [asdict(level) for level in levels],
    }  # fmt: skip
    data[_key(workers)] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return entry


def _planned_peak(scenario: Scenario) -> float | None:
    open_phases = [p for p in scenario.phase_list if p.load.mode == "open"]
    return sum(p.load.shape.peak for p in open_phases) if open_phases else None


def client_headroom(scenario: Scenario, workers: int = 1) -> dict[str, Any]:
    """The planned peak rate as a share of this machine's measured ceiling (run.json's and the summary's ``client``)."""
    planned = _planned_peak(scenario)
    calibration = load_calibration(workers)
    block: dict[str, Any] = {"workers": workers, "planned_peak_rps": planned, "calibrated_ceiling_rps": None,
                             "share_of_ceiling": None, "warning": None, "note": None}  # fmt: skip
    if calibration is None:
        block["note"] = f"client not calibrated on this machine for {workers} worker(s): run `surgelab calibrate`"
        return block
    ceiling = calibration["ceiling_rps"]
    block["calibrated_ceiling_rps"] = ceiling
    if planned is not None and ceiling:
        share = planned / ceiling
        block["share_of_ceiling"] = share
        if share > WARN_SHARE:
            block["warning"] = (
                f"planned peak {planned:g} req/s is {share:.0%} of this client's measured ceiling ({ceiling:.0f} req/s "
                f"with {workers} worker(s)): the result may be the client's limit — add --workers"
            )
    return block


def unrecorded_headroom(scenario: Scenario, workers: int = 1) -> dict[str, Any]:
    """The ``client`` block of a run whose run.json has none (recorded before surgelab kept it there)."""
    return {"workers": workers, "planned_peak_rps": _planned_peak(scenario), "calibrated_ceiling_rps": None,
            "share_of_ceiling": None, "warning": None,
            "note": "the run did not record the client's calibration in run.json"}  # fmt: skip
