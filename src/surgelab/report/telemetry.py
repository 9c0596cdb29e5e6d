"""Server telemetry overlays: ``telemetry.parquet`` in a run directory, when a scraper wrote one.

Absent file, absent section. Two layouts are read: long (a time column, ``metric``/``name``
and ``value``; with ``labels``, ``source`` and ``kind`` as ``surgelab.telemetry`` writes them,
only gauges are drawn and the scraper's own ``up``/``scrape_duration_seconds`` are left out)
and wide (a time column and one numeric column per gauge). The time column is
``t_ns``/``time_ns`` (run clock, nanoseconds) or ``t_s``/``time_s`` (seconds). Each gauge is
averaged over the report's 1 s windows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from surgelab.report.extensions import Unreadable, why
from surgelab.telemetry.presets import PRESETS, PROCESS_MEMORY

__all__ = ["TELEMETRY_FILE", "telemetry_series"]

TELEMETRY_FILE = "telemetry.parquet"
_TIME_COLUMNS = {"t_ns": 1e-9, "time_ns": 1e-9, "t_s": 1.0, "time_s": 1.0, "t": 1.0}
_MAX_SERIES = 24
# the scraper's own series, and a server's resident memory (bytes: read as a trend in summary.json,
# never drawn beside request counts)
_SCRAPER_OWN = ("up", "scrape_duration_seconds", PROCESS_MEMORY)


def _numeric(column: pa.ChunkedArray) -> np.ndarray:
    return column.cast(pa.float64()).to_numpy(zero_copy_only=False)


def _gauges(table: pa.Table) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    time_col = next((c for c in _TIME_COLUMNS if c in table.column_names), None)
    if time_col is None:
        return None
    t = _numeric(table[time_col]) * _TIME_COLUMNS[time_col]
    names = table.column_names
    key = "metric" if "metric" in names else "name" if "name" in names else None
    if key is not None and "value" in names:
        if "kind" in names:
            keep = np.isin(table["kind"].to_numpy(zero_copy_only=False).astype(str), ["gauge", "untyped", "unknown"])
            keep &= ~np.isin(table[key].to_numpy(zero_copy_only=False).astype(str), list(_SCRAPER_OWN))
            table, t = table.filter(pa.array(keep)), t[keep]
        labels = table[key].to_numpy(zero_copy_only=False).astype(str)
        if "source" in names and len(set(table["source"].to_pylist())) > 1:
            labels = np.char.add(np.char.add(table["source"].to_numpy(zero_copy_only=False).astype(str), ":"), labels)
        if "labels" in names:
            extra = table["labels"].to_numpy(zero_copy_only=False).astype(str)
            labels = np.array([f"{a}{{{b}}}" if b not in ("", "None") else a for a, b in zip(labels, extra)])
        values = _numeric(table["value"])
        return t, {name: (t[labels == name], values[labels == name]) for name in np.unique(labels)}  # type: ignore[misc]
    series = {}
    for name in names:
        kind = table.schema.field(name).type
        if name not in _TIME_COLUMNS and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            series[name] = (t, _numeric(table[name]))
    return t, series  # type: ignore[return-value]


def telemetry_series(run_dir: Path | str, wall_s: float) -> dict[str, Any] | None:
    """Gauges averaged per 1 s window on the run clock, or None without telemetry."""
    path = Path(run_dir) / TELEMETRY_FILE
    if not path.exists():
        return None
    try:
        parsed = _gauges(pq.read_table(path))
    except Exception as exc:  # unreadable telemetry never breaks a report: the page says it is missing
        raise Unreadable(f"{TELEMETRY_FILE} cannot be read ({why(exc)}): the server telemetry section is left out") from None
    if parsed is None:
        return None
    n = max(int(np.ceil(wall_s)), 1)
    out: dict[str, list[float | None]] = {}
    for name, (t, v) in list(parsed[1].items())[:_MAX_SERIES]:
        keep = np.isfinite(t) & np.isfinite(v) & (t >= 0) & (t < n)
        idx = np.floor(t[keep]).astype(np.int64)
        sums = np.bincount(idx, weights=v[keep], minlength=n)[:n]
        counts = np.bincount(idx, minlength=n)[:n]
        means = [round(float(s / k), 4) if k else None for s, k in zip(sums, counts)]
        out[str(name)] = _held(means, np.sort(t[keep]), v[keep][np.argsort(t[keep], kind="stable")])
    if not out:
        return None
    fractions = [name for name, values in out.items() if _is_fraction(name, values)]
    return {"t": [i + 0.5 for i in range(n)], "series": out, "labels": _labels(list(out)), "fractions": fractions}


def _held(means: list[float | None], t: np.ndarray, v: np.ndarray) -> list[float | None]:
    """A window that no scrape fell in only because the scrapes drift against the 1 s grid (one at
    16.9999 s, the next at 18.0001 s) holds the last scraped value, as the gauge itself does until the
    next scrape; a window inside a longer silence (a scrape missed) stays empty."""
    if t.size < 2:
        return means
    step = float(np.median(np.diff(t)))
    out = list(means)
    for i, value in enumerate(means):
        if value is not None:
            continue
        before = int(np.searchsorted(t, i, side="left")) - 1  # the last scrape before the window
        if 0 <= before < t.size - 1 and t[before + 1] - t[before] <= 1.5 * step:
            out[i] = round(float(v[before]), 4)
    return out


_ROLE_WORDS = {"running": "requests running", "waiting": "requests waiting", "kv_usage": "KV cache used",
               "gpu_util": "GPU utilisation", "memory_used": "GPU memory used"}  # fmt: skip


def _roles() -> dict[str, str]:
    out: dict[str, str] = {}
    for preset in PRESETS.values():
        for role, names in preset.roles.items():
            for name in names.split("|"):
                out[name] = role
    return out


_FAMILY_ROLE = _roles()


def _is_fraction(name: str, values: list[float | None]) -> bool:
    """A 0–1 gauge (KV-cache usage and the like): drawn on its own axis, not beside request counts."""
    family = name.split("{", 1)[0]
    finite = [v for v in values if v is not None]
    if _FAMILY_ROLE.get(family) == "kv_usage" or _FAMILY_ROLE.get(name.split("{", 1)[0].split(":", 1)[-1]) == "kv_usage":
        return True
    words = ("perc", "usage", "ratio", "fraction", "hit_rate", "utilization")
    return any(w in family for w in words) and bool(finite) and max(finite) <= 1.0


def _labels(names: list[str]) -> dict[str, str]:
    """Readable legends: the role in words with the server's metric name short, and only the labels that differ."""
    out = {}
    label_sets = {n: dict(kv.split("=", 1) for kv in n.partition("{")[2].rstrip("}").split(",") if "=" in kv) for n in names}
    varying = {k for n in names for k, v in label_sets[n].items() if any(label_sets[m].get(k) != v for m in names)}
    for name in names:
        family = name.split("{", 1)[0]
        bare = family.split(":", 1)[1] if family.count(":") > 1 else family  # "source:vllm:x" → "vllm:x"
        role = _FAMILY_ROLE.get(bare) or _FAMILY_ROLE.get(family)
        short = bare.split(":", 1)[-1]
        text = f"{_ROLE_WORDS.get(role, role)} ({short})" if role else short
        extra = ", ".join(f"{k}={v}" for k, v in label_sets[name].items() if k in varying)
        source = family.split(":", 1)[0] + ": " if family.count(":") > 1 else ""
        out[name] = source + text + (f" [{extra}]" if extra else "")
    return out
