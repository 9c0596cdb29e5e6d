"""Synthetic inputs for the provider tests: summaries, probe results, history rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def summary(p90_ms: float = 1200.0, error_rate: float = 0.0, ok: int = 200, tokens_per_s: float = 1000.0,
            prompt_total: int = 40_000, output_total: int = 10_000) -> dict[str, Any]:  # fmt: skip
    """The fields of summary.json that scoring and cost read (docs/summary.md)."""
    latency = {"count": ok, "mean": p90_ms * 0.7, "min": 10.0, "p50": p90_ms * 0.6, "p90": p90_ms,
               "p95": p90_ms * 1.1, "p99": p90_ms * 1.3, "max": p90_ms * 1.5}  # fmt: skip
    failed = round(ok * error_rate / (1 - error_rate)) if error_rate < 1 else ok
    return {
        "schema_version": 1, "name": "run",
        "requests": {"measured": ok + failed, "ok": ok, "failed": failed, "error_rate": error_rate, "drop_rate": 0.0},
        "throughput": {"requests_per_s": ok / 60, "output_tokens_per_s": tokens_per_s * 0.2,
                       "input_tokens_per_s": tokens_per_s * 0.8, "total_tokens_per_s": tokens_per_s},
        "latency_ms": {"ttft": latency, "e2e": latency, "itl": latency, "tpot": latency},
        "goodput": {"requests_per_s": ok / 60},
        "tokens": {"prompt_total": prompt_total, "output_total": output_total},
        "by_target": {},
    }  # fmt: skip


def write_run(path: Path, **kwargs: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_text(json.dumps(summary(**kwargs)), encoding="utf-8")
    return path


def write_probe(path: Path, target: str, **values: float | None) -> Path:
    metrics = {m: {"value": v, "found": f"{m} found", "how": f"{m} by test"} for m, v in values.items()}
    path.write_text(
        json.dumps({"kind": "surgelab-probe", "version": 1, "target": target, "metrics": metrics}), encoding="utf-8"
    )
    return path
