"""The server's own latency histograms beside the client's measurements, bucket for bucket.

A scraped engine (vLLM, SGLang, TGI…; ``telemetry.presets`` names each one's TTFT and E2E
histogram families) counts every request into fixed buckets. The run report draws how many
requests the server put in each bucket over the run against how many of the client's own
measurements fall in the same buckets: where the client's bars sit one bucket right of the
server's, the time is spent between them (network, HTTP, the server's front end before its clock
starts). Percentiles are read the way PromQL reads a histogram (linear inside a bucket) for both,
so the two are compared on equal terms, and beside them the client's exact ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from surgelab.report.extensions import Unreadable, why
from surgelab.telemetry.derive import histogram_quantile, increase
from surgelab.telemetry.presets import PRESETS
from surgelab.telemetry.samples import parse_labels

__all__ = ["server_latency"]

_FILE = "telemetry.parquet"
_ROLES = {"ttft": "time to first token", "e2e": "end to end"}


def server_latency(run_dir: Path | str, client_s: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """Per latency role (``ttft``, ``e2e``): the server's bucket counts over the run and the client's in the same buckets.

    ``client_s``: the client's latencies in seconds by role, of every ok request (warm-up included: the
    server counts those too).
    None without scraped histograms of a known engine.
    """
    path = Path(run_dir) / _FILE
    if not path.exists():
        return None
    try:
        table = pq.read_table(path, columns=["source", "metric", "labels", "value", "kind", "t_ns"])
    except Exception as exc:  # the page says so, never breaks
        raise Unreadable(f"{_FILE} cannot be read ({why(exc)}): the server's latency histograms are left out") from None
    columns = {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}
    out: dict[str, Any] = {}
    for role, words in _ROLES.items():
        families = {p.latency[role]: p.name for p in PRESETS.values() if role in p.latency}
        for family, engine in families.items():
            buckets = _buckets(columns, family + "_bucket")
            if buckets is None or role not in client_s:
                continue
            source, bounds, cumulative = buckets
            out[role] = _compare(words, engine, source, family, bounds, cumulative, client_s[role])
            break
    return out or None


def _buckets(c: dict[str, np.ndarray], metric: str) -> tuple[str, np.ndarray, np.ndarray] | None:
    """The first source's cumulative bucket counts grown over the run, summed over label sets (model, engine…)."""
    rows = (c["metric"] == metric) & (c["kind"] == "histogram")
    if not rows.any():
        return None
    source = str(c["source"][rows][0])
    rows &= c["source"] == source
    growth: dict[float, float] = {}
    series: dict[str, list[int]] = {}
    for i in np.flatnonzero(rows):
        series.setdefault(str(c["labels"][i]), []).append(int(i))
    for labels, idx in series.items():
        bound = float(parse_labels(labels).get("le", "inf").replace("+Inf", "inf"))
        order = np.argsort(c["t_ns"][idx], kind="stable")
        growth[bound] = growth.get(bound, 0.0) + increase(c["value"][idx][order])
    bounds = np.array(sorted(growth))
    return source, bounds, np.array([growth[b] for b in bounds])


def _compare(words: str, engine: str, source: str, family: str, bounds: np.ndarray, cumulative: np.ndarray,
             client: np.ndarray) -> dict[str, Any]:  # fmt: skip
    client = client[np.isfinite(client)]
    client_cumulative = np.array([np.count_nonzero(client <= b) for b in bounds], dtype=float)
    per_bucket = np.diff(cumulative, prepend=0.0)
    client_per_bucket = np.diff(client_cumulative, prepend=0.0)
    used = np.flatnonzero((per_bucket > 0) | (client_per_bucket > 0))
    lo, hi = (int(used[0]), int(used[-1]) + 1) if used.size else (0, len(bounds))

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1000, 2)

    counted, measured = int(round(cumulative[-1])) if cumulative.size else 0, int(client.size)
    note = ""
    if counted < measured:
        note = (f"the server counted {counted:,} of the client's {measured:,}: its last scrape came before the last "
                "answers (or a server restart lost counts)")  # fmt: skip
    elif counted > measured:
        note = (
            f"the server counted {counted - measured:,} more than the client's ok answers: failed or others' requests"
        )
    if hi - lo == 1:
        note = "; ".join(
            filter(None, [note, "one of the server's buckets holds them all: too coarse to compare percentiles"])
        )

    return {
        "title": words, "engine": engine, "source": source, "metric": family,
        "buckets": [_label(bounds, i) for i in range(lo, hi)],
        "server": [int(round(v)) for v in per_bucket[lo:hi]], "client": [int(v) for v in client_per_bucket[lo:hi]],
        "server_total": counted, "client_total": measured, "note": note,
        "server_ms": {f"p{q}": ms(histogram_quantile(q / 100, bounds, cumulative)) for q in (50, 99)},
        "client_bucketed_ms": {f"p{q}": ms(histogram_quantile(q / 100, bounds, client_cumulative)) for q in (50, 99)},
        "client_ms": {f"p{q}": ms(float(np.percentile(client, q))) if client.size else None for q in (50, 99)},
    }  # fmt: skip


def _label(bounds: np.ndarray, i: int) -> str:
    """``≤ 20 ms``, ``> 60 s``: a bucket by its upper bound (the one before it is its lower), short enough
    for a phone's axis."""
    upper = bounds[i]
    if np.isinf(upper):
        return f"> {_time(bounds[i - 1])}" if i > 0 else "all"
    return f"≤ {_time(upper)}"


def _time(seconds: float) -> str:
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"
