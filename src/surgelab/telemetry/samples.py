"""Telemetry samples as rows: what ``telemetry.parquet`` holds and how text becomes rows.

One row per sample: the run-clock time of the scrape, the source, the sample name (histogram
buckets keep their ``_bucket`` name and ``le`` label), its labels and value, and the family's
type. Every scrape also adds ``up`` (1 or 0, with the error as a label when 0) and
``scrape_duration_seconds``, as Prometheus itself does, so gaps are in the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["TELEMETRY_SCHEMA", "SampleBuffer", "parse_exposition", "label_text", "parse_labels"]

TELEMETRY_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("t_ns", pa.int64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("labels", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
    ],
    metadata={"surgelab.telemetry_version": "1"},
)


def label_text(labels: dict[str, str]) -> str:
    """Labels as one stable string, ``k=v`` pairs sorted and comma separated."""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def parse_labels(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split(",") if "=" in pair) if text else {}


@dataclass
class Family:
    name: str
    kind: str
    samples: list[tuple[str, dict[str, str], float]]


def parse_exposition(text: str) -> list[Family]:
    """Prometheus text format → families; raises ValueError on text that is not that format."""
    try:
        return [
            Family(f.name, f.type, [(s.name, dict(s.labels), float(s.value)) for s in f.samples])
            for f in text_string_to_metric_families(text)
        ]
    except Exception as exc:  # the parser raises several types for malformed text
        raise ValueError(f"not Prometheus text format: {exc}") from None


@dataclass
class SampleBuffer:
    """Rows gathered between flushes."""

    rows: dict[str, list] = field(default_factory=lambda: {f.name: [] for f in TELEMETRY_SCHEMA})
    seq: int = 0

    def add(self, t_ns: int, source: str, metric: str, labels: str, value: float, kind: str) -> None:
        r = self.rows
        r["seq"].append(self.seq)
        self.seq += 1
        r["t_ns"].append(t_ns)
        r["source"].append(source)
        r["metric"].append(metric)
        r["labels"].append(labels)
        r["value"].append(value)
        r["kind"].append(kind)

    def take(self) -> pa.Table:
        rows, self.rows = self.rows, {f.name: [] for f in TELEMETRY_SCHEMA}
        return pa.Table.from_pydict(rows, schema=TELEMETRY_SCHEMA)
