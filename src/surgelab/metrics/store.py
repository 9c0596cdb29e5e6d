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

__all__ = ["RecordMeta", "RecordBuffer", "RecordStore", "read_records"]

RECORDS_FILE = "records.parquet"
PARTS_DIR = "records.parts"


@dataclass(frozen=True, slots=True)
class RecordMeta:
    """Who a request was: fixed when it is scheduled."""

    id: int
    intended_ns: int
    warmup: bool
    user: int = -1
    worker: int = 0
    phase: str = "main"
    request_class: str = "default"
    tier: str = "default"
    session: int = -1
    turn: int = 0


class RecordBuffer:
    """Rows accumulated column by column; ``take`` hands them over as one Arrow table."""

    _SCALARS = (
        "id", "worker", "user", "phase", "request_class", "tier", "session", "turn", "warmup", "state", "intended_ns",
        "sent_ns", "first_byte_ns", "first_token_ns", "end_ns", "prompt_tokens",
        "output_tokens", "usage_source", "http_status", "error",
    )  # fmt: skip

    def __init__(self) -> None:
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
        c["worker"].append(meta.worker)
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
        if len(outcome.token_ns) > 1:
            times = np.frombuffer(outcome.token_ns, dtype=np.int64)
            gaps = (np.diff(times) // 1000).astype(np.int32)
            self._itl_values.frombytes(gaps.tobytes())
        self._itl_offsets.append(len(self._itl_values))

    def take(self) -> pa.Table:
        """Return the buffered rows as a table and start empty again."""
        cols, values, offsets = self._cols, self._itl_values, self._itl_offsets
        self._reset()
        arrays = [pa.array(cols[f.name], type=f.type) for f in RECORD_SCHEMA if f.name != "itl_us"]
        itl = pa.ListArray.from_arrays(
            pa.array(np.frombuffer(offsets, dtype=np.int32)),
            pa.array(np.frombuffer(values, dtype=np.int32)),
        )
        return pa.Table.from_arrays([*arrays, itl], schema=RECORD_SCHEMA)


class RecordStore:
    """Writes flushed tables as part files and merges them at the end."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.parts_dir = self.run_dir / PARTS_DIR
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self._next_part = 0
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        number, self._next_part = self._next_part, self._next_part + 1  # reserved before writing
        path = self.parts_dir / f"part-{number:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp, compression="zstd")
        tmp.replace(path)  # a part is either whole or absent
        self.rows_written += table.num_rows

    def finalize(self) -> Path:
        """Merge all parts into ``records.parquet`` (sorted by id) and remove them."""
        return merge_parts(self.run_dir)


def _part_files(run_dir: Path) -> list[Path]:
    parts = Path(run_dir) / PARTS_DIR
    return sorted(parts.glob("part-*.parquet")) if parts.is_dir() else []


def read_records(run_dir: Path | str) -> pa.Table:
    """All records of a run: the merged file plus any parts a crash left behind."""
    run_dir = Path(run_dir)
    tables = []
    merged = run_dir / RECORDS_FILE
    if merged.is_file():
        tables.append(pq.read_table(merged))
    for part in _part_files(run_dir):
        try:
            part_table = pq.read_table(part)
        except (OSError, pa.ArrowInvalid):
            continue  # a part cut short by a crash holds nothing readable
        if merged.is_file():  # a merge interrupted before it removed its parts
            seen = pc.is_in(part_table["id"], value_set=tables[0]["id"])
            part_table = part_table.filter(pc.invert(seen))
        tables.append(part_table)
    if not tables:
        return RECORD_SCHEMA.empty_table()
    table = pa.concat_tables([t.cast(RECORD_SCHEMA) for t in tables])
    return table.sort_by("id")


def merge_parts(run_dir: Path | str) -> Path:
    """Fold every readable part into ``records.parquet``; safe to call after a crash."""
    run_dir = Path(run_dir)
    table = read_records(run_dir)
    target = run_dir / RECORDS_FILE
    tmp = target.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(target)
    for part in _part_files(run_dir):
        part.unlink()
    parts_dir = run_dir / PARTS_DIR
    if parts_dir.is_dir():
        for leftover in parts_dir.iterdir():
            leftover.unlink()
        parts_dir.rmdir()
    return target
