"""Columnar record buffering with crash-safe incremental Parquet writes.

While a run is under way every flush writes one complete, small Parquet file into
``records.parts/`` (a file with a footer, readable on its own), so a crash, even ``kill -9``,
loses at most one flush interval. A clean finish merges the parts into ``records.parquet``.
A write that fails (a full disk) leaves no ``.tmp`` behind and raises an OSError naming the file;
the parts already written stay where they are until a merge of them is complete.
``read_records`` reads whichever exists, so a crashed run can still be summarised.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.files import removing_on_error
from surgelab.metrics.record import RECORD_SCHEMA, Outcome

__all__ = [
    "RecordMeta", "MetaRow", "RecordBuffer", "RecordStore", "PartStore", "read_records", "merge_parts", "read_table_parts",
    "merge_table_parts", "conform", "return_freed_memory", "HeldTables", "table_from_bytes", "recorded_ids",
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
    step: str | None = None  # an agentic task's step (docs/agents.md)


class MetaRow(NamedTuple):
    """``RecordMeta`` as a tuple, field for field: a simulation makes one per request, and a tuple is cheaper."""

    id: int
    intended_ns: int
    warmup: bool
    user: int = -1
    phase: str = "main"
    request_class: str = "default"
    tier: str = "default"
    session: int = -1
    turn: int = 0
    kind: str = ""
    step: str | None = None


class RecordBuffer:
    """Rows accumulated column by column; ``take`` hands them over as one Arrow table.

    ``worker`` is the process that measured them (0 with a single process).
    """

    _SCALARS = (
        "id", "worker", "user", "phase", "request_class", "tier", "session", "turn", "warmup", "state", "intended_ns",
        "sent_ns", "first_byte_ns", "first_token_ns", "end_ns", "prompt_tokens",
        "output_tokens", "usage_source", "http_status", "error", "target", "kind",
        "input_units", "output_units", "step_ms", "attempts", "resends", "intended_prompt_tokens",
        "connect_ms", "tls_ms", "redirects", "ratelimit_requests", "ratelimit_tokens", "ratelimit_reset_s",
        "retry_after_s", "tool_calls", "tool_names", "tool_args_bytes", "first_tool_ns", "step",
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
        c["resends"].append(outcome.resends)
        c["intended_prompt_tokens"].append(outcome.intended_prompt_tokens)
        c["connect_ms"].append(outcome.connect_ms)
        c["tls_ms"].append(outcome.tls_ms)
        c["redirects"].append(outcome.redirects)
        c["ratelimit_requests"].append(outcome.ratelimit_requests)
        c["ratelimit_tokens"].append(outcome.ratelimit_tokens)
        c["ratelimit_reset_s"].append(outcome.ratelimit_reset_s)
        c["retry_after_s"].append(outcome.retry_after_s)
        c["tool_calls"].append(outcome.tool_calls)
        c["tool_names"].append(outcome.tool_names)
        c["tool_args_bytes"].append(outcome.tool_args_bytes)
        c["first_tool_ns"].append(outcome.first_tool_ns)
        c["step"].append(meta.step)
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
        with removing_on_error(path.with_suffix(".tmp"), path) as tmp:  # a full disk leaves no half part behind
            pq.write_table(table, tmp, compression="zstd")
            tmp.replace(path)  # a part is either whole or absent
        self.rows_written += table.num_rows

    def finalize(self) -> Path:
        """Merge all parts into ``<stem>.parquet`` and remove them."""
        return merge_table_parts(self.run_dir, self.stem, self.schema, self.key)


class RecordStore(PartStore):
    """The store of ``records.parquet``; each worker process writes parts of its own."""

    def __init__(self, run_dir: Path, worker: int | None = None, writer: str = "") -> None:
        """``writer`` tells apart two writers of one worker's parts (the driver's ``lost-`` records)."""
        prefix = "" if worker is None else f"w{worker:03d}-"
        super().__init__(run_dir, "records", RECORD_SCHEMA, "id", prefix=prefix + writer)


class HeldTables:
    """A store that keeps flushed tables for someone elsewhere to take (a Ray driver pulling a
    remote worker's records while the run goes on); ``take`` hands them over as Arrow IPC bytes."""

    def __init__(self, schema: pa.Schema = RECORD_SCHEMA) -> None:
        self.schema = schema
        self._tables: list[pa.Table] = []
        self._lock = threading.Lock()  # flushes are written from a thread
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            with self._lock:
                self._tables.append(table)
                self.rows_written += table.num_rows

    def take(self) -> bytes | None:
        """Everything written since the last ``take``, or None when nothing was."""
        with self._lock:
            tables, self._tables = self._tables, []
        if not tables:
            return None
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.schema) as writer:
            for table in tables:
                writer.write_table(table)
        return sink.getvalue().to_pybytes()


def table_from_bytes(data: bytes) -> pa.Table:
    """A table handed over by ``HeldTables.take``."""
    return pa.ipc.open_stream(data).read_all()


def recorded_ids(run_dir: Path | str, worker: int) -> np.ndarray:
    """The ids of the records worker ``worker`` has left in the run directory so far (its parts)."""
    ids = []
    for part in _part_files(Path(run_dir), "records"):
        if not part.name.startswith(f"w{worker:03d}-"):
            continue
        try:
            ids.append(pq.read_table(part, columns=["id"])["id"].to_numpy())
        except (OSError, pa.ArrowInvalid):
            continue  # a part cut short by a crash holds nothing readable
    return np.concatenate(ids) if ids else np.empty(0, dtype=np.int64)


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
    """Fold every readable part into ``<stem>.parquet``, ordered by ``key``; safe to call after a crash.

    Streams: pieces are read in order of their smallest key and rows are written as soon as no
    later piece can come before them, so memory holds the overlapping pieces, not the run.
    """
    run_dir = Path(run_dir)
    target = run_dir / f"{stem}.parquet"
    if not _part_files(run_dir, stem) and target.is_file() and pq.read_schema(target).equals(schema):
        _remove_parts(run_dir, stem)  # already merged: nothing to rewrite
        return target
    with removing_on_error(target.with_suffix(".tmp"), target) as tmp:  # the parts stay until the merge is whole
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for table in _in_key_order(_pieces(run_dir, stem, key), schema, key):
                writer.write_table(table)
                pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages otherwise
        tmp.replace(target)
    _remove_parts(run_dir, stem)
    return_freed_memory()
    return target


_ROWS_PER_GROUP = 16_384
Piece = tuple[int, Callable[[], pa.Table]]  # (smallest key, how to read it)


def _pieces(run_dir: Path, stem: str, key: str) -> list[Piece]:
    """Every readable piece: the merged file's row groups, then each part (minus rows already merged)."""
    pieces: list[Piece] = []
    merged = run_dir / f"{stem}.parquet"
    merged_keys = None
    if merged.is_file():
        merged_keys = pq.read_table(merged, columns=[key], use_threads=False)[key]
        pieces += _merged_pieces(merged, merged_keys.to_numpy())
    for part in _part_files(run_dir, stem):
        try:
            file = pq.ParquetFile(part)
            lows = [_smallest(file, i, key) for i in range(file.num_row_groups)]
        except (OSError, pa.ArrowInvalid):
            continue  # a part cut short by a crash holds nothing readable
        if lows:
            pieces.append((min(lows), functools.partial(_unmerged, part, key, merged_keys)))
    return pieces


def _merged_pieces(path: Path, keys: np.ndarray) -> list[Piece]:
    """The merged file in slices of ``_ROWS_PER_GROUP`` rows, read by one pass over it (it is sorted by key).

    Sorting the pieces by smallest key keeps these slices in file order, so each read takes the next rows.
    """
    if keys.size and not np.all(keys[1:] > keys[:-1]):  # not written by a merge: read it whole
        return [(int(keys.min()), lambda: pq.read_table(path))]
    rows = _Rows(pq.ParquetFile(path).iter_batches(batch_size=_ROWS_PER_GROUP))
    return [(int(keys[start]), lambda: rows.take(_ROWS_PER_GROUP)) for start in range(0, keys.size, _ROWS_PER_GROUP)]


class _Rows:
    """A stream of record batches read as tables of a chosen number of rows."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._pending: pa.Table | None = None

    def take(self, n: int) -> pa.Table:
        tables: list[pa.Table] = [] if self._pending is None else [self._pending]
        have = sum(t.num_rows for t in tables)
        while have < n and (batch := next(self._batches, None)) is not None:
            tables.append(pa.Table.from_batches([batch]))
            have += batch.num_rows
        rows = pa.concat_tables(tables)
        self._pending = rows.slice(n)
        return rows.slice(0, n)


def _smallest(file: pq.ParquetFile, group: int, key: str) -> int:
    """The smallest ``key`` in a row group, from its statistics (read from the data when there are none)."""
    column = file.metadata.row_group(group).column(file.schema_arrow.get_field_index(key))
    if column.statistics is not None and column.statistics.has_min_max:
        return column.statistics.min
    return pc.min(file.read_row_group(group, columns=[key])[key]).as_py()


def _unmerged(path: Path, key: str, merged_keys: pa.ChunkedArray | None) -> pa.Table:
    """The rows of a part not yet in the merged file (a merge interrupted before it removed its parts)."""
    part = pq.read_table(path)
    if merged_keys is None:
        return part
    return part.filter(pc.invert(pc.is_in(part[key], value_set=merged_keys)))


def _in_key_order(pieces: list[Piece], schema: pa.Schema, key: str) -> Iterator[pa.Table]:
    """All rows ordered by ``key``, in tables of about ``_ROWS_PER_GROUP`` rows."""
    pieces = sorted(pieces, key=lambda piece: piece[0])
    pending, ready, ready_rows = schema.empty_table(), [], 0
    for i, (_, read) in enumerate(pieces):
        pending = pa.concat_tables([pending, conform(read(), schema)])
        if i + 1 < len(pieces):  # rows below the next piece's smallest key are final
            below = pc.less(pending[key], pa.scalar(pieces[i + 1][0], schema.field(key).type))
            done, pending = pending.filter(below), pending.filter(pc.invert(below))
        else:
            done, pending = pending, schema.empty_table()
        ready.append(done.sort_by(key))
        ready_rows += done.num_rows
        if ready_rows >= _ROWS_PER_GROUP:
            yield pa.concat_tables(ready).combine_chunks()
            ready, ready_rows = [], 0
    if ready_rows:
        yield pa.concat_tables(ready).combine_chunks()


def _remove_parts(run_dir: Path, stem: str) -> None:
    parts_dir = run_dir / f"{stem}.parts"
    if parts_dir.is_dir():
        for leftover in parts_dir.iterdir():
            leftover.unlink()
        parts_dir.rmdir()


def return_freed_memory() -> None:
    """Give memory freed so far back to the system, and have glibc give large blocks back at once from now on.

    Reading a long run's records column after column frees many batch-sized blocks; kept by
    the allocators, they were a large part of the end-of-run peak. glibc raises its mmap
    threshold after a large free (so later arrays come from the heap and stay resident): it is
    pinned at its default (128 KiB) and the heap trimmed; Arrow's allocator releases what it
    keeps. Without glibc only Arrow's part applies.
    """
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
        libc.malloc_trim(0)


_M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>


def read_records(run_dir: Path | str) -> pa.Table:
    """All records of a run: the merged file plus any parts a crash left behind."""
    return read_table_parts(run_dir, "records", RECORD_SCHEMA, "id")


def merge_parts(run_dir: Path | str) -> Path:
    """Fold every readable records part into ``records.parquet``; safe to call after a crash."""
    return merge_table_parts(run_dir, "records", RECORD_SCHEMA, "id")
