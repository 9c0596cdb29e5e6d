"""The monitoring history: one row per target per probe round, in a local SQLite file.

SQLite (stdlib) because the history must outlive any process, be appended to by a cron job
or a long-running ``surgelab monitor``, and be readable with any SQL tool. Timestamps are
Unix seconds (UTC); hour-of-day grouping happens at read time in the zone asked for.
"""

from __future__ import annotations

import sqlite3
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["Sample", "History", "HistoryError", "sample_from_summary"]

SCHEMA_VERSION = 1
_COLUMNS = """
    ts REAL NOT NULL, target TEXT NOT NULL, requests INTEGER NOT NULL, ok INTEGER NOT NULL,
    failed INTEGER NOT NULL, throughput_rps REAL, output_tokens_per_s REAL,
    ttft_p90_ms REAL, e2e_p50_ms REAL, e2e_p90_ms REAL, e2e_p99_ms REAL, note TEXT NOT NULL DEFAULT ''
"""


class HistoryError(ValueError):
    """A database that cannot be opened or is not a surgelab history."""


@dataclass(frozen=True)
class Sample:
    """One probe round against one target. Latencies in ms; ``None`` when nothing succeeded."""

    ts: float
    target: str
    requests: int
    ok: int
    failed: int
    throughput_rps: float | None = None
    output_tokens_per_s: float | None = None
    ttft_p90_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p99_ms: float | None = None
    note: str = ""

    @property
    def error_rate(self) -> float:
        done = self.ok + self.failed
        return self.failed / done if done else 0.0


def sample_from_summary(ts: float, target: str, summary: dict[str, Any], note: str = "") -> Sample:
    """The history row for a run's ``summary.json``."""
    req, thr, lat = summary.get("requests") or {}, summary.get("throughput") or {}, summary.get("latency_ms") or {}
    e2e, ttft = lat.get("e2e") or {}, lat.get("ttft") or {}
    return Sample(
        ts=ts, target=target, requests=int(req.get("measured") or 0), ok=int(req.get("ok") or 0),
        failed=int(req.get("failed") or 0), throughput_rps=thr.get("requests_per_s"),
        output_tokens_per_s=thr.get("output_tokens_per_s"), ttft_p90_ms=ttft.get("p90"),
        e2e_p50_ms=e2e.get("p50"), e2e_p90_ms=e2e.get("p90"), e2e_p99_ms=e2e.get("p99"), note=note,
    )  # fmt: skip


class History:
    """``with History(path) as db: db.append(sample)``; ``create=False`` refuses a missing file."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise HistoryError(f"{self.path}: no such history database (surgelab monitor --db creates one)")
        try:
            self.db = sqlite3.connect(self.path)
            self.db.execute(f"CREATE TABLE IF NOT EXISTS samples ({_COLUMNS})")
            self.db.execute("CREATE INDEX IF NOT EXISTS samples_target_ts ON samples (target, ts)")
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.commit()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path}: not a surgelab history database ({exc})") from None

    def __enter__(self) -> History:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def append(self, *samples: Sample) -> None:
        names = ", ".join(f.name for f in fields(Sample))
        marks = ", ".join("?" for _ in fields(Sample))
        with self.db:
            self.db.executemany(f"INSERT INTO samples ({names}) VALUES ({marks})", [astuple(s) for s in samples])

    def samples(
        self, target: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[Sample]:
        """Rows in time order, optionally of one target and within [since, until)."""
        query, args = f"SELECT {', '.join(f.name for f in fields(Sample))} FROM samples WHERE 1=1", []
        for clause, value in (("target = ?", target), ("ts >= ?", since), ("ts < ?", until)):
            if value is not None:
                query += f" AND {clause}"
                args.append(value)
        return [Sample(*row) for row in self.db.execute(query + " ORDER BY ts, target", args)]

    def targets(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT DISTINCT target FROM samples ORDER BY target")]

    def latest_ts(self) -> float | None:
        row = self.db.execute("SELECT MAX(ts) FROM samples").fetchone()
        return row[0] if row else None
