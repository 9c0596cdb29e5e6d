"""Records of a simulated run: the columns ``RecordBuffer`` writes, built in bulk.

The columns and their meaning are ``RecordBuffer``'s (``surgelab.metrics.store``); the
difference is speed: inter-token gaps are computed for many requests in one numpy pass per
batch instead of one call per request, and the batches stay in memory (a simulation has no
crash to survive) until ``records.parquet`` is written once, sorted by id like a measured
run's merged file.
"""

from __future__ import annotations

from array import array
from operator import attrgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.files import write_atomic
from surgelab.metrics.record import RECORD_SCHEMA, Outcome
from surgelab.metrics.store import RECORDS_FILE, RecordMeta

__all__ = ["Recorder"]

_META_FIELDS = frozenset(RecordMeta.__dataclass_fields__)
_FLUSH_ROWS = 50_000
_MAX_LIST_VALUES = 2**31 - 1  # what one chunk of a list column with 32-bit offsets holds


class Recorder:
    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RECORDS_FILE
        self.count = 0
        self._tables: list[pa.Table] = []
        self._metas: list[RecordMeta] = []
        self._outs: list[Outcome] = []

    def __call__(self, meta: RecordMeta, outcome: Outcome) -> None:
        self._metas.append(meta)
        self._outs.append(outcome)
        self.count += 1
        if len(self._metas) >= _FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self._metas:
            self._tables.append(self._table(self._metas, self._outs))
        self._metas, self._outs = [], []

    def close(self) -> pa.Table:
        """Write ``records.parquet`` and return its table."""
        self.flush()
        table = pa.concat_tables(self._tables) if self._tables else RECORD_SCHEMA.empty_table()
        if sum(len(t["itl_us"].chunk(0).values) for t in self._tables) < _MAX_LIST_VALUES:
            table = table.combine_chunks()  # sorting one chunk is many times faster than sorting many
        table = table.sort_by("id")
        self._tables = []
        write_atomic(self.path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))  # no .tmp on a full disk
        return table

    @staticmethod
    def _table(metas: list[RecordMeta], outs: list[Outcome]) -> pa.Table:
        """Every schema column from the meta or the outcome field of its name, as RecordBuffer does."""
        lengths = np.fromiter((len(o.token_ns) for o in outs), dtype=np.int64, count=len(outs))
        joined = array("q")
        for o in outs:
            joined.extend(o.token_ns)
        gaps = np.diff(np.frombuffer(joined, dtype=np.int64))
        bounds = np.cumsum(lengths)[:-1] - 1  # a diff across two requests is no gap
        keep = np.ones(gaps.size, dtype=bool)
        keep[bounds[(bounds >= 0) & (bounds < gaps.size)]] = False
        gaps = gaps[keep]
        # ns to µs: within a request token times never decrease, so truncation is the floor
        # (arrow's integer division is several times faster than numpy's); wrapped to int32 as astype does
        itl = pc.cast(pc.divide(pa.array(gaps), 1000), pa.int32(), safe=False)
        offsets = np.concatenate(([0], np.cumsum(np.maximum(lengths - 1, 0)))).astype(np.int32)
        arrays = []
        for f in RECORD_SCHEMA:
            if f.name == "itl_us":
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets), itl))
                continue
            if f.name == "worker":
                values: list = [0] * len(metas)  # one simulating process
            elif f.name == "state":
                values = [o.state.value for o in outs]
            else:
                values = list(map(attrgetter(f.name), metas if f.name in _META_FIELDS else outs))
            arrays.append(pa.array(values, type=f.type))
        return pa.Table.from_arrays(arrays, schema=RECORD_SCHEMA)
