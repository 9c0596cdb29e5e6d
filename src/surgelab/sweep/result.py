"""The sweep's result model: one row per level, the knee, the SLA capacity, the stop reason.

``sweep.json`` is the versioned contract that ``surgelab plan`` reads; ``sweep.parquet``
holds the same rows flattened (``ttft_p99_ms`` …) for dataframes. Each row points at its
level's run directory, where ``summary.json`` and ``records.parquet`` hold everything else.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from surgelab.files import write_atomic

__all__ = [
    "LevelRow",
    "SweepResult",
    "SweepFileError",
    "row_from_summary",
    "completion_rate",
    "read_sweep",
    "write_sweep",
    "SCHEMA_VERSION",
]

SCHEMA_VERSION = 1
LATENCIES = ("ttft", "itl", "tpot", "e2e")
PERCENTILES = ("mean", "p50", "p90", "p95", "p99")


class SweepFileError(ValueError):
    """A sweep.json that cannot be read; the message is one line for the CLI."""


@dataclass
class LevelRow:
    """One held level, measured over its window (settle excluded)."""

    index: int  # run order, 0-based; the run directory is level-NN
    offered: float  # the level: users (closed loop) or requests/s (open loop)
    run_dir: str  # relative to the sweep directory
    stage: str  # "climb", "refine"
    achieved_load: float | None  # open: arrival rate sent; closed: mean requests in flight
    requests_per_s: float
    output_tokens_per_s: float
    goodput_per_s: float | None
    error_rate: float
    mean_in_flight: float | None
    measured: int
    valid: bool
    validity_reasons: list[str]
    latency_ms: dict[str, dict[str, float | None]]  # ttft/itl/tpot/e2e → mean/p50/p90/p95/p99
    telemetry: dict[str, dict[str, Any]] = field(default_factory=dict)  # scraped roles → mean/max at this level
    diagnosis: list[str] = field(default_factory=list)  # the level's bottleneck hints

    def latency(self, metric: str, stat: str) -> float | None:
        return self.latency_ms.get(metric, {}).get(stat)

    def flat(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("latency_ms", "validity_reasons", "telemetry", "diagnosis")}
        out["validity_reasons"] = "; ".join(self.validity_reasons)
        out["diagnosis"] = "; ".join(self.diagnosis)
        for role, stats in self.telemetry.items():
            out[f"{role}_mean"], out[f"{role}_max"] = stats.get("mean"), stats.get("max")
        for metric in LATENCIES:
            for stat in PERCENTILES:
                out[f"{metric}_{stat}_ms"] = self.latency(metric, stat)
        return out


def completion_rate(records: pa.Table, start_s: float, end_s: float) -> tuple[float, float]:
    """Successes (and their output tokens) per second over the window ``[start_s, end_s]``.

    Unlike ``summary.json``'s throughput this also counts requests sent during the settle
    period: a level's steady-state completion rate, not biased low when latency is a large
    part of a short hold.

    Closed loop: the sum of every user's rate over its own **whole cycles**. A user's window
    runs from its last answer (any outcome) at or before ``start_s`` to its first at or after
    ``end_s`` (its first send, and ``end_s``, where it has none), and its successes in it are
    divided by its length: no cycle is cut by an edge of the window. A user who answers every
    L seconds is measured at exactly 1/L, so c users at a steady level add up to c/L — a
    service that answers in rounds is not measured at c/L ± one round's c over the hold, and
    a user's answers that come in clusters do not bias it either. Open loop (no users): the
    successes that ended inside the window, divided by its length.
    """
    if end_s <= start_s or records.num_rows == 0:
        return 0.0, 0.0
    lo, hi = round(start_s * 1e9), round(end_s * 1e9)
    ends = records.column("end_ns")
    ended = ends.is_valid().to_numpy(zero_copy_only=False)  # a null is no end (numpy would read it as NaN)
    end = ends.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)  # integer ns: exact, not float seconds
    ok = (records.column("state").to_numpy(zero_copy_only=False).astype(str) == "ok") & ended
    tokens = records.column("output_tokens").fill_null(0).to_numpy(zero_copy_only=False).astype(float)
    user = records.column("user").to_numpy(zero_copy_only=False)
    users = user >= 0
    inside = ok & ~users & (end >= lo) & (end <= hi)  # open-loop requests: the window as it is
    window = (hi - lo) / 1e9
    rate, tok_rate = inside.sum() / window, tokens[inside].sum() / window
    if users.any():
        intended = records.column("intended_ns").to_numpy(zero_copy_only=False).astype(np.int64)
        first_send = {int(u): int(t) for u, t in zip(*_group_min(user[users], intended[users]))}
        keep = users & ended
        order = np.lexsort((end[keep], user[keep]))
        e, u, good, tok = end[keep][order], user[keep][order], ok[keep][order], tokens[keep][order]
        bounds = np.flatnonzero(np.diff(u)) + 1
        for s, t in zip(np.r_[0, bounds], np.r_[bounds, e.size]):
            mine = e[s:t]
            i_lo, i_hi = np.searchsorted(mine, lo, "right"), np.searchsorted(mine, hi, "left")
            a = int(mine[i_lo - 1]) if i_lo else first_send[int(u[s])]
            b = int(mine[i_hi]) if i_hi < mine.size else hi
            if b <= a:
                continue
            span = slice(s + np.searchsorted(mine, a, "right"), s + np.searchsorted(mine, b, "right"))
            length = (b - a) / 1e9
            rate += good[span].sum() / length
            tok_rate += tok[span][good[span]].sum() / length
    return float(rate), float(tok_rate)


def _group_min(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct key and the least of its values."""
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    first = np.r_[True, k[1:] != k[:-1]]
    return k[first], v[first]


def row_from_summary(
    index: int,
    offered: float,
    run_dir: str,
    stage: str,
    summary: dict[str, Any],
    rates: tuple[float, float] | None = None,
) -> LevelRow:
    """Pick the sweep's columns out of a level's ``summary.json`` (contract: docs/summary.md).

    ``rates`` (requests/s, output tokens/s) replaces the summary's throughput when given
    (see ``completion_rate``).
    """
    conc = summary["concurrency"]
    rps, tps = (
        rates
        if rates is not None
        else (summary["throughput"]["requests_per_s"], summary["throughput"]["output_tokens_per_s"])
    )
    achieved = conc["arrival_rate"] if summary["mode"] == "open" else conc["mean_in_flight"]
    lat = {m: {s: summary["latency_ms"][m].get(s) for s in PERCENTILES} for m in LATENCIES}
    return LevelRow(
        index=index,
        offered=offered,
        run_dir=run_dir,
        stage=stage,
        achieved_load=achieved,
        requests_per_s=rps,
        output_tokens_per_s=tps,
        goodput_per_s=summary["goodput"]["requests_per_s"],
        error_rate=summary["requests"]["error_rate"] or 0.0,
        mean_in_flight=conc["mean_in_flight"],
        measured=summary["requests"]["measured"],
        valid=bool(summary["validity"]["valid"]),
        validity_reasons=list(summary["validity"]["reasons"]),
        latency_ms=lat,
        telemetry={
            role: {"mean": v.get("mean"), "max": v.get("max"), "metric": v.get("metric")}
            for role, v in (summary.get("telemetry") or {}).get("roles", {}).items()
        },
        diagnosis=list(summary.get("diagnosis", [])),
    )


@dataclass
class SweepResult:
    """Everything ``sweep.json`` holds."""

    name: str
    mode: str  # concurrency | rate
    unit: str
    target: dict[str, Any]
    config: dict[str, Any]
    slo: list[str]  # SLA expressions used for the capacity, e.g. "p99(ttft) <= 0.5"
    levels: list[LevelRow]
    stop_reason: str
    knee: dict[str, Any] = field(default_factory=dict)
    sla_capacity: dict[str, Any] | None = None
    breaking: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def sorted_levels(self) -> list[LevelRow]:
        return sorted(self.levels, key=lambda r: r.offered)

    def batch_speedup(self) -> list[dict[str, float]]:
        """Seed 002's batch speedup per level, beside the throughput gain it is often confused with.

        ``speedup`` = single-request latency ÷ latency at the level (E2E P50), with the lowest
        level standing in for a single request; above 1 only on a service whose requests get
        faster as the batch grows (the seed's toy), below 1 on real engines. ``throughput_gain``
        = requests/s at the level ÷ requests/s at the lowest level: what batching actually buys.
        """
        timed = [(r, e2e) for r in self.sorted_levels() if (e2e := r.latency("e2e", "p50")) and r.requests_per_s > 0]
        if not timed:
            return []
        base, single = timed[0]
        return [
            {"level": r.offered, "speedup": single / e2e, "throughput_gain": r.requests_per_s / base.requests_per_s}
            for r, e2e in timed
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_sweep(result: SweepResult, sweep_dir: Path) -> Path:
    """Write ``sweep.json`` and ``sweep.parquet``; return the JSON path."""
    path = sweep_dir / "sweep.json"
    write_atomic(path, json.dumps(result.to_dict(), indent=2, allow_nan=False, default=str) + "\n")
    if result.levels:
        table = pa.Table.from_pylist([r.flat() for r in result.sorted_levels()])
        write_atomic(sweep_dir / "sweep.parquet", lambda tmp: pq.write_table(table, tmp))
    return path


def read_sweep(path: Path) -> SweepResult:
    """Read ``sweep.json`` (or a sweep directory); SweepFileError with one line otherwise."""
    if path.is_dir():
        path = path / "sweep.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepFileError(f"sweep file not found: {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SweepFileError(f"cannot read sweep file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or "levels" not in data:
        raise SweepFileError(
            f"{path} is not a sweep.json of schema version {SCHEMA_VERSION} (written by surgelab sweep)"
        )
    try:
        levels = [LevelRow(**row) for row in data["levels"]]
        rest = {k: v for k, v in data.items() if k != "levels"}
        return SweepResult(levels=levels, **rest)
    except TypeError as exc:
        raise SweepFileError(f"{path}: unexpected content ({exc})") from None
