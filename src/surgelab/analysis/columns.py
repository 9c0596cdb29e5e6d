"""Record columns in compact numpy form, read one column at a time, for the summary and the report.

A million-record run must be summarised in well under 200 bytes a record, so nothing here
holds the whole Arrow table: a column is read (from ``records.parquet`` when there is one),
converted, and let go before the next. Strings become one-byte codes (``Labels``) instead of
Python or fixed-width numpy strings, and the inter-token gaps (``Gaps``) are never held at all:
they are walked in batches, and their statistics equal numpy's on the float seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.metrics.store import PARTS_DIR, RECORDS_FILE, read_records, return_freed_memory

__all__ = ["ColumnSource", "Labels", "Gaps", "seconds", "floats", "plain", "labels"]

_NS = 1e9
_US = 1e6
_BATCH_ROWS = 65_536


class ColumnSource:
    """Record columns by name, converted to numpy a batch of rows at a time.

    Reads an in-memory table, or a run directory's ``records.parquet`` one column at a time. A
    run directory with parts left by a crash (or an unsorted file) is read whole, ordered by id,
    as ``read_records`` does, so that every sum adds the same values in the same order. Only one
    batch is ever held in Arrow: Arrow's allocator keeps what it frees, numpy's gives it back.
    """

    def __init__(self, records: pa.Table | Path | str) -> None:
        self.path: Path | None = None
        if isinstance(records, pa.Table):
            self.table = records
        else:
            run_dir = Path(records)
            path = run_dir / RECORDS_FILE
            if (run_dir / PARTS_DIR).is_dir() or not path.is_file() or not _sorted_by_id(path):
                self.table = read_records(run_dir)
            else:
                self.path, self.table = path, pq.read_schema(path).empty_table()
        self.rows = self.table.num_rows if self.path is None else pq.read_metadata(self.path).num_rows

    def has(self, name: str) -> bool:
        return name in self.table.column_names

    def batches(self, name: str) -> Iterator[pa.Array]:
        """A column in batches of at most ``_BATCH_ROWS`` rows (decoding a whole row group costs several times its size)."""
        if self.path is None:
            for chunk in self.table[name].chunks:
                for start in range(0, len(chunk), _BATCH_ROWS):
                    yield chunk.slice(start, _BATCH_ROWS)
            return
        file = pq.ParquetFile(self.path)
        for batch in file.iter_batches(batch_size=_BATCH_ROWS, columns=[name], use_threads=False):
            yield batch.column(0)
        return_freed_memory()  # the reader's buffers and the converted batches, which allocators would keep

    def numpy(self, name: str, convert: Callable[[pa.Array], np.ndarray]) -> np.ndarray | None:
        """``convert`` of the whole column, applied batch by batch; None when the records predate the column."""
        if not self.has(name):
            return None
        empty = pa.array([], type=self.table.schema.field(name).type)
        return np.concatenate([convert(batch) for batch in self.batches(name)] or [convert(empty)])

    def column(self, name: str, convert: Callable[[pa.Array], np.ndarray]) -> np.ndarray:
        """``numpy`` of a column every record has (the schema's first version had it)."""
        values = self.numpy(name, convert)
        if values is None:
            raise ValueError(f"the records have no {name} column: not surgelab's records")
        return values

    def floats(self, name: str) -> np.ndarray:
        """A numeric column as float64, NaN where null (all NaN when the records predate it)."""
        values = self.numpy(name, floats)
        return values if values is not None else np.full(self.rows, np.nan)


def _sorted_by_id(path: Path) -> bool:
    """Whether ids strictly increase through the file (as a merge writes them), read a batch at a time."""
    last = None
    for batch in pq.ParquetFile(path).iter_batches(batch_size=_BATCH_ROWS, columns=["id"], use_threads=False):
        ids = batch.column(0).to_numpy()
        if ids.size == 0:
            continue
        if (last is not None and ids[0] <= last) or np.any(ids[1:] <= ids[:-1]):
            return False
        last = ids[-1]
    return_freed_memory()
    return True


def seconds(batch: pa.Array) -> np.ndarray:
    """Nanoseconds as float seconds, NaN where null."""
    return batch.cast(pa.float64()).to_numpy(zero_copy_only=False) / _NS


def floats(batch: pa.Array) -> np.ndarray:
    """Numbers as float64, NaN where null."""
    return batch.cast(pa.float64()).to_numpy(zero_copy_only=False)


def plain(batch: pa.Array) -> np.ndarray:
    """Arrow's own numpy conversion (float with NaN where an integer column has nulls)."""
    return batch.to_numpy(zero_copy_only=False)


class Labels:
    """A string column as small integer codes into its distinct values.

    One byte a row where a numpy string array takes four per character. Compares like a numpy
    array (``labels == "ok"`` is a boolean mask); a null reads as ``"None"``, as ``astype(str)`` did.
    """

    def __init__(self, codes: np.ndarray, values: list[str]) -> None:
        self.codes, self.values = codes, values

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, rows: np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.values)

    def __eq__(self, value: object) -> np.ndarray:  # type: ignore[override]
        return self.isin([value])

    def __ne__(self, value: object) -> np.ndarray:  # type: ignore[override]
        return ~self.isin([value])

    __hash__ = None  # type: ignore[assignment]

    def isin(self, values: Iterable[object]) -> np.ndarray:
        wanted = set(values)
        table = np.array([v in wanted for v in self.values] + [False], dtype=bool)
        return table[self.codes]

    def startswith(self, prefix: str) -> np.ndarray:
        table = np.array([v.startswith(prefix) for v in self.values] + [False], dtype=bool)
        return table[self.codes]

    def counts(self) -> dict[str, int]:
        """Rows per distinct value present, in sorted order."""
        per_code = np.bincount(self.codes, minlength=len(self.values))
        totals: dict[str, int] = {}
        for value, n in zip(self.values, per_code.tolist()):
            if n:
                totals[value] = totals.get(value, 0) + n
        return dict(sorted(totals.items()))

    def distinct(self) -> list[str]:
        """The distinct values present, sorted."""
        return list(self.counts())

    def replace(self, old: str, new: str) -> Labels:
        return Labels(self.codes, [new if v == old else v for v in self.values])


def labels(source: ColumnSource, name: str, default: str = "") -> Labels:
    """A string column as ``Labels`` (every row ``default`` when the records predate it)."""
    if not source.has(name):
        return Labels(np.zeros(source.rows, dtype=np.uint8), [default])
    values: dict[str, int] = {}
    codes = []
    for batch in source.batches(name):
        encoded = pc.dictionary_encode(batch, null_encoding="encode")
        to_code = [values.setdefault(str(v), len(values)) for v in encoded.dictionary.to_pylist()]
        codes.append(np.array(to_code, dtype=np.int64)[encoded.indices.to_numpy(zero_copy_only=False)])
    dtype = np.min_scalar_type(len(values))
    return Labels(np.concatenate(codes or [np.zeros(0, dtype=np.int64)]).astype(dtype), list(values))


class Gaps:
    """Every request's inter-token gaps (integer microseconds), walked a batch of requests at a time.

    Only the number of gaps per request stays in memory; the gaps are read again from the
    records on each walk. Held whole they would be 60 bytes a record at 16 tokens, and grow
    with the output length. ``values(rows)`` are the chosen requests' gaps as float seconds,
    what ``flat / 1e6`` gave; ``summary`` gives numpy's statistics of them without holding them.
    """

    def __init__(self, source: ColumnSource, name: str = "itl_us") -> None:
        self._source, self._name = source, name
        self.lengths = np.concatenate([_lengths(b) for b in source.batches(name)] or [np.zeros(0, dtype=np.int32)])

    def _walk(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first request, gaps per request, flat gaps) of each batch of requests."""
        start = 0
        for batch in self._source.batches(self._name):
            lengths = _lengths(batch)
            flat = pc.list_flatten(batch).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
            yield start, lengths, flat
            start += len(lengths)

    def chunks(self, rows: np.ndarray) -> Iterator[np.ndarray]:
        """The chosen requests' gaps (int µs), in order, a batch at a time."""
        for start, lengths, flat in self._walk():
            chunk = flat[np.repeat(rows[start : start + len(lengths)], lengths)]
            if chunk.size:
                yield chunk

    def values(self, rows: np.ndarray) -> np.ndarray:
        return np.concatenate([*self.chunks(rows), np.zeros(0, dtype=np.int32)]).astype(np.float64) / _US

    def count(self, rows: np.ndarray) -> int:
        return int(self.lengths.sum(where=rows, dtype=np.int64))

    def mean_per_request(self) -> np.ndarray:
        """Mean gap of each request in seconds (NaN without gaps), summed in the same order as ``np.bincount``."""
        sums = np.zeros(len(self.lengths))
        for start, lengths, flat in self._walk():
            parent = np.repeat(np.arange(len(lengths)), lengths)
            sums[start : start + len(lengths)] = np.bincount(parent, weights=flat / _US, minlength=len(lengths))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.lengths > 0, sums / np.maximum(self.lengths, 1), np.nan)

    def summary(self, rows: np.ndarray, scale: float) -> _Summary:
        """Count, sum and value counts of the chosen gaps, as float seconds × ``scale``, in one pass."""
        return _Summary(self.chunks(rows), self.count(rows), scale)


def _lengths(batch: pa.Array) -> np.ndarray:
    """Gaps per request (a null list has none)."""
    return pc.fill_null(pc.list_value_length(batch), 0).to_numpy(zero_copy_only=False).astype(np.int32)


class _Summary:
    """Exact statistics of ``f(x) = x / 1e6 * scale`` over a stream of integer gaps ``x``.

    ``f`` never decreases, so order statistics and extremes are ``f`` of the integer ones, found
    from value counts. The sum follows numpy's pairwise summation tree (halves rounded to
    multiples of 8), with whole subtrees summed by numpy itself, so it is the same float.
    """

    LEAF = 1 << 16

    def __init__(self, chunks: Iterator[np.ndarray], n: int, scale: float) -> None:
        self.n, self.scale = n, scale
        self._chunks, self._pending = chunks, np.zeros(0, dtype=np.int32)
        self._leaves: list[tuple[np.ndarray, np.ndarray]] = []  # each leaf's value counts, merged once at the end
        self.total = float(self._pairwise(n)) if n else 0.0
        self._values, self._counts = self._merged()

    def f(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64) / _US * self.scale

    def _pairwise(self, n: int) -> np.floating:
        if n <= self.LEAF:
            return np.add.reduce(self.f(self._take(n)))
        half = n // 2 - (n // 2) % 8
        left = self._pairwise(half)
        return left + self._pairwise(n - half)

    def _take(self, n: int) -> np.ndarray:
        """The next ``n`` gaps: views into the chunks (copied only where a leaf spans two), never the rest
        of a chunk again (joining it for every leaf made a batch of millions of gaps quadratic)."""
        parts, have = [], 0
        while have < n:
            if not self._pending.size:
                self._pending = next(self._chunks)
            part = self._pending[: n - have]
            self._pending = self._pending[part.size :]
            parts.append(part)
            have += part.size
        taken = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self._leaves.append(np.unique(taken, return_counts=True))
        return taken

    def _merged(self) -> tuple[np.ndarray, np.ndarray]:
        """Every leaf's value counts added up: distinct values, sorted, and how often each came."""
        if not self._leaves:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        values = np.concatenate([v for v, _ in self._leaves])
        counts = np.concatenate([c for _, c in self._leaves])
        self._leaves = []
        merged, inverse = np.unique(values, return_inverse=True)
        return merged, np.bincount(inverse, weights=counts, minlength=merged.size).astype(np.int64)

    def order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """The values at 0-based ``ranks`` of the sorted stream, as floats."""
        index = np.searchsorted(np.cumsum(self._counts), ranks, side="right")
        return self.f(self._values[index])

    def quantiles(self, q: float | np.ndarray) -> np.ndarray:
        """``np.quantile(values, q)`` (linear method): the neighbouring order statistics, interpolated as numpy does."""
        virtual = (self.n - 1) * np.atleast_1d(np.asarray(q, dtype=np.float64))
        below = np.floor(virtual)
        gamma = virtual - below
        low = below.astype(np.int64)
        high = low + 1
        last = virtual >= self.n - 1
        low[last], high[last] = self.n - 1, self.n - 1
        a, b = self.order_statistics(low), self.order_statistics(high)
        diff = b - a
        result = a + diff * gamma
        np.subtract(b, diff * (1 - gamma), out=result, where=gamma >= 0.5)
        return result

    def mean(self) -> float:
        return float(np.float64(self.total) / self.n)

    def min(self) -> float:
        return float(self.f(self._values[:1])[0])

    def max(self) -> float:
        return float(self.f(self._values[-1:])[0])
