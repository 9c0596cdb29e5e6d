"""Columnar record buffering with crash-safe incremental Parquet writes.

While a run is under way every flush writes one complete, small Parquet file into
``records.parts/`` (a file with a footer, readable on its own), so a crash, even ``kill -9``,
loses at most one flush interval. A clean finish merges the parts into ``records.parquet``.
``read_records`` reads whichever exists, so a crashed run can still be summarised.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.metrics.record import RECORD_SCHEMA, Outcome

__all__ = [
    "RecordMeta", "RecordBuffer", "RecordStore", "PartStore", "read_records", "merge_parts", "read_table_parts",
    "merge_table_parts", "conform",
]  # fmt: skip

RECORDS_FILE = "records.parquet"
PARTS_DIR = "records.parts"  # where a run's records are while it is under way


@dataclass(frozen=True, slots=True)
class RecordMeta:
    """Who a request was: fixed when it is scheduled."""

    id: int
    intended_ns: int
    warmup: bool
    user: int = -1
    phase: str = "main"
    request_class: str = "default"
    tier: str = "default"
    session: int = -1
    turn: int = 0
    kind: str = ""  # the spec's kind when known (a dropped request never reaches the client)


class RecordBuffer:
    """Rows accumulated column by column; ``take`` hands them over as one Arrow table.

    ``worker`` is the process that measured them (0 with a single process).
    """

    _SCALARS = (
        "id", "worker", "user", "phase", "request_class", "tier", "session", "turn", "warmup", "state", "intended_ns",
        "sent_ns", "first_byte_ns", "first_token_ns", "end_ns", "prompt_tokens",
        "output_tokens", "usage_source", "http_status", "error", "target", "kind",
        "input_units", "output_units", "step_ms", "attempts",
    )  # fmt: skip

    def __init__(self, worker: int = 0) -> None:
        self.worker = worker
        self._reset()

    def _reset(self) -> None:
        self._cols: dict[str, list] = {name: [] for name in self._SCALARS}
        self._itl_values = array("i")
        self._itl_offsets = array("i", [0])

    def __len__(self) -> int:
        return len(self._cols["id"])

    def add(self, meta: RecordMeta, outcome: Outcome) -> None:
        c = self._cols
        c["id"].append(meta.id)
        c["worker"].append(self.worker)
        c["user"].append(meta.user)
        c["phase"].append(meta.phase)
        c["request_class"].append(meta.request_class)
        c["tier"].append(meta.tier)
        c["session"].append(meta.session)
        c["turn"].append(meta.turn)
        c["warmup"].append(meta.warmup)
        c["state"].append(outcome.state.value)
        c["intended_ns"].append(meta.intended_ns)
        c["sent_ns"].append(outcome.sent_ns)
        c["first_byte_ns"].append(outcome.first_byte_ns)
        c["first_token_ns"].append(outcome.first_token_ns)
        c["end_ns"].append(outcome.end_ns)
        c["prompt_tokens"].append(outcome.prompt_tokens)
        c["output_tokens"].append(outcome.output_tokens)
        c["usage_source"].append(outcome.usage_source)
        c["http_status"].append(outcome.http_status)
        c["error"].append(outcome.error)
        c["kind"].append(outcome.kind or meta.kind)
        c["input_units"].append(outcome.input_units)
        c["output_units"].append(outcome.output_units)
        c["step_ms"].append(outcome.step_ms)
        c["target"].append(outcome.target)
        c["attempts"].append(outcome.attempts)
        if len(outcome.token_ns) > 1:
            times = np.frombuffer(outcome.token_ns, dtype=np.int64)
            gaps = (np.diff(times) // 1000).astype(np.int32)
            self._itl_values.frombytes(gaps.tobytes())
        self._itl_offsets.append(len(self._itl_values))

    def take(self) -> pa.Table:
        """Return the buffered rows as a table and start empty again."""
        cols, values, offsets = self._cols, self._itl_values, self._itl_offsets
        self._reset()
        itl = pa.ListArray.from_arrays(
            pa.array(np.frombuffer(offsets, dtype=np.int32)),
            pa.array(np.frombuffer(values, dtype=np.int32)),
        )
        arrays = [itl if f.name == "itl_us" else pa.array(cols[f.name], type=f.type) for f in RECORD_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=RECORD_SCHEMA)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``'s layout; columns it predates are added (nulls, or "" where not nullable)."""
    for f in schema:
        if f.name not in table.column_names:
            fill = pa.nulls(table.num_rows, f.type) if f.nullable else pa.array([""] * table.num_rows, f.type)
            table = table.append_column(f, fill)
    return table.select(schema.names).cast(schema)


class PartStore:
    """Writes flushed tables as part files ``<stem>.parts/part-N.parquet`` and merges them at the end.

    ``key`` is the column that identifies a row (used to drop duplicates left by a merge that
    was interrupted) and orders the merged file.
    """

    def __init__(self, run_dir: Path, stem: str, schema: pa.Schema, key: str, prefix: str = "") -> None:
        self.run_dir, self.stem, self.schema, self.key = Path(run_dir), stem, schema, key
        self.prefix = prefix  # distinguishes the parts of several writers (worker processes)
        self.parts_dir = self.run_dir / f"{stem}.parts"
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self._next_part = 0
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        number, self._next_part = self._next_part, self._next_part + 1  # reserved before writing
        path = self.parts_dir / f"{self.prefix}part-{number:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp, compression="zstd")
        tmp.replace(path)  # a part is either whole or absent
        self.rows_written += table.num_rows

    def finalize(self) -> Path:
        """Merge all parts into ``<stem>.parquet`` and remove them."""
        return merge_table_parts(self.run_dir, self.stem, self.schema, self.key)


class RecordStore(PartStore):
    """The store of ``records.parquet``; each worker process writes parts of its own."""

    def __init__(self, run_dir: Path, worker: int | None = None) -> None:
        super().__init__(run_dir, "records", RECORD_SCHEMA, "id", prefix="" if worker is None else f"w{worker:03d}-")


def _part_files(run_dir: Path, stem: str) -> list[Path]:
    parts = Path(run_dir) / f"{stem}.parts"
    return sorted(parts.glob("*part-*.parquet")) if parts.is_dir() else []


def read_table_parts(run_dir: Path | str, stem: str, schema: pa.Schema, key: str) -> pa.Table:
    """The merged file plus any parts a crash left behind, ordered by ``key``."""
    run_dir = Path(run_dir)
    tables = []
    merged = run_dir / f"{stem}.parquet"
    if merged.is_file():
        tables.append(pq.read_table(merged))
    for part in _part_files(run_dir, stem):
        try:
            part_table = pq.read_table(part)
        except (OSError, pa.ArrowInvalid):
            continue  # a part cut short by a crash holds nothing readable
        if merged.is_file():  # a merge interrupted before it removed its parts
            seen = pc.is_in(part_table[key], value_set=tables[0][key])
            part_table = part_table.filter(pc.invert(seen))
        tables.append(part_table)
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables([conform(t, schema) for t in tables])
    return table.sort_by(key)


def merge_table_parts(run_dir: Path | str, stem: str, schema: pa.Schema, key: str) -> Path:
    """Fold every readable part into ``<stem>.parquet``; safe to call after a crash."""
    run_dir = Path(run_dir)
    table = read_table_parts(run_dir, stem, schema, key)
    target = run_dir / f"{stem}.parquet"
    tmp = target.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(target)
    parts_dir = run_dir / f"{stem}.parts"
    if parts_dir.is_dir():
        for leftover in parts_dir.iterdir():
            leftover.unlink()
        parts_dir.rmdir()
    return target


def read_records(run_dir: Path | str) -> pa.Table:
    """All records of a run: the merged file plus any parts a crash left behind."""
    return read_table_parts(run_dir, "records", RECORD_SCHEMA, "id")


def merge_parts(run_dir: Path | str) -> Path:
    """Fold every readable records part into ``records.parquet``; safe to call after a crash."""
    return merge_table_parts(run_dir, "records", RECORD_SCHEMA, "id")
