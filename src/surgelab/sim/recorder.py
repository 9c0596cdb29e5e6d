"""Records of a simulated run: the columns ``RecordBuffer`` writes, built in bulk.

The columns and their meaning are ``RecordBuffer``'s (``surgelab.metrics.store``); the
difference is speed: inter-token gaps are computed for many requests in one numpy pass per
batch instead of one call per request, and the batches stay in memory (a simulation has no
crash to survive) until ``records.parquet`` is written once, sorted by id like a measured
run's merged file.
"""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from surgelab.files import write_atomic
from surgelab.metrics.record import RECORD_SCHEMA, Outcome, State
from surgelab.metrics.store import RECORDS_FILE, RecordMeta

__all__ = ["Recorder"]

_META_FIELDS = frozenset(RecordMeta.__dataclass_fields__)
_TEXT_COLUMNS = [f.name for f in RECORD_SCHEMA if f.type == pa.string()]
_DEFAULT = Outcome()  # what an outcome holds in a field nobody set
_STATE, _TOKEN_NS = attrgetter("state"), attrgetter("token_ns")
_STATE_VALUE = {s: s.value for s in State}.__getitem__
_ID = attrgetter("id")
_FLUSH_ROWS = 50_000
_GAP_ROWS = 4_096  # requests whose inter-token gaps are computed together
_MAX_WINDOWS = 64  # batches overlapping in more places than this are sorted whole
_MAX_LIST_VALUES = 2**31 - 1  # what one chunk of a list column with 32-bit offsets holds


class Recorder:
    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RECORDS_FILE
        self.count = 0
        self._tables: list[pa.Table] = []
        self._metas: list = []  # RecordMeta or MetaRow
        self._outs: list = []  # Outcome or SimOutcome

    def __call__(self, meta, outcome) -> None:
        self._metas.append(meta)
        self._outs.append(outcome)
        self.count += 1
        if len(self._metas) >= _FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        """The pending rows become a batch, in id order (so that the batches seldom need sorting again)."""
        metas, outs = self._metas, self._outs
        if metas:
            ids = list(map(_ID, metas))
            order = sorted(range(len(ids)), key=ids.__getitem__)
            self._tables.append(self._table(list(map(metas.__getitem__, order)), list(map(outs.__getitem__, order))))
        self._metas, self._outs = [], []

    def close(self) -> pa.Table:
        """Write ``records.parquet`` and return its table."""
        self.flush()
        table = _in_id_order(self._tables)
        self._tables = []
        # no .tmp on a full disk; dictionaries for the text columns only: on the inter-token gaps one costs
        # time and makes the file larger
        write_atomic(
            self.path, lambda tmp: pq.write_table(table, tmp, compression="zstd", use_dictionary=_TEXT_COLUMNS)
        )
        return table

    @staticmethod
    def _table(metas: list, outs: list) -> pa.Table:
        """Every schema column from the meta or the outcome field of its name, as RecordBuffer does.

        Metas are ``RecordMeta`` or ``MetaRow``; outcomes ``Outcome`` or the simulator's
        ``SimOutcome``, whose absent fields are ``Outcome``'s defaults (one constant column each).
        """
        n = len(outs)
        times = list(map(_TOKEN_NS, outs))
        lengths = np.fromiter(map(len, times), dtype=np.int64, count=n)
        offsets = np.concatenate(([0], np.cumsum(np.maximum(lengths - 1, 0))))
        itl = np.empty(int(offsets[-1]), dtype=np.int32)
        for start in range(0, n, _GAP_ROWS):  # a slice at a time: temporaries small enough to reuse memory
            stop = min(start + _GAP_ROWS, n)
            gaps = np.diff(np.frombuffer(b"".join(times[start:stop]), dtype=np.int64))
            np.floor_divide(gaps, 1000, out=gaps)  # ns to µs, as RecordBuffer does
            bounds = np.cumsum(lengths[start:stop])[:-1] - 1  # a diff across two requests is no gap
            keep = np.ones(gaps.size, dtype=bool)
            keep[bounds[(bounds >= 0) & (bounds < gaps.size)]] = False
            # wrapped to int32 as astype does
            np.copyto(itl[offsets[start] : offsets[stop]], gaps[keep], casting="unsafe")
        offsets = offsets.astype(np.int32)
        kinds = set(map(type, outs))
        arrays = []
        for f in RECORD_SCHEMA:
            name = f.name
            if name == "itl_us":
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(itl)))
                continue
            if name == "worker":
                values: list = [0] * n  # one simulating process
            elif name == "state":
                values = list(map(_STATE_VALUE, map(_STATE, outs)))
            elif name in _META_FIELDS:
                values = list(map(attrgetter(name), metas))
            elif all(hasattr(k, name) for k in kinds):
                values = list(map(attrgetter(name), outs))
            elif not any(hasattr(k, name) for k in kinds):
                values = [getattr(_DEFAULT, name)] * n  # a field no outcome here has: its default
            else:
                values = [getattr(o, name, getattr(_DEFAULT, name)) for o in outs]
            arrays.append(pa.array(values, type=f.type))
        return pa.Table.from_arrays(arrays, schema=RECORD_SCHEMA)


def _in_id_order(tables: list[pa.Table]) -> pa.Table:
    """Batches, each in id order, as one table in id order (``sort_by("id")``, stable).

    Requests finish about in id order, so consecutive batches overlap in a few ids at most:
    only the rows of each window where they do are moved (the rest are slices, not copies;
    copying every inter-token gap once more was most of the time ``close`` took).
    """
    if not tables:
        return RECORD_SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    order = np.argsort(table["id"].to_numpy(), kind="stable")
    n = len(order)
    # windows that hold their own rows: a window ends where every row before it belongs before it
    ends = np.flatnonzero(np.maximum.accumulate(order) == np.arange(n))
    starts = np.concatenate(([0], ends[:-1] + 1))
    moved = np.flatnonzero(ends > starts)  # a window of one row is in place
    if not moved.size:
        return table
    if moved.size > _MAX_WINDOWS:
        if sum(len(t["itl_us"].chunk(0).values) for t in tables) < _MAX_LIST_VALUES:
            table = table.combine_chunks()  # sorting one chunk is many times faster than sorting many
        return table.sort_by("id")
    pieces, at = [], 0
    for k in moved:
        start, end = int(starts[k]), int(ends[k]) + 1
        if start > at:
            pieces.append(table.slice(at, start - at))
        pieces.append(table.slice(start, end - start).take(pa.array(order[start:end] - start)))
        at = end
    if at < n:
        pieces.append(table.slice(at))
    return pa.concat_tables(pieces)
