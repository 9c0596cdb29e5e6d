"""Compact record columns for the summary and report: the same figures as numpy on the full arrays."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from surgelab.analysis.columns import ColumnSource, Gaps, Labels, labels, plain
from surgelab.analysis.stats import distribution, gap_distribution
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta


def _gaps(rng: np.random.Generator, n: int) -> tuple[Gaps, list[list[int]]]:
    lists = [rng.integers(0, int(rng.choice([5, 1000, 10**7])), int(k)).tolist() for k in rng.integers(0, 40, n)]
    lists[::7] = [None] * len(lists[::7])  # null lists count as no gaps
    table = pa.table({"itl_us": pa.array(lists, type=pa.list_(pa.int32()))})
    return Gaps(ColumnSource(table)), [x or [] for x in lists]


@pytest.mark.parametrize("seed", range(25))
def test_gap_statistics_equal_numpys_on_the_float_seconds(seed, monkeypatch):
    monkeypatch.setattr("surgelab.analysis.columns._BATCH_ROWS", 97)  # many batches
    monkeypatch.setattr("surgelab.analysis.columns._Summary.LEAF", 256)  # a deep summation tree
    rng = np.random.default_rng(seed)
    gaps, lists = _gaps(rng, int(rng.integers(0, 3000)))
    rows = rng.random(len(lists)) < rng.random()
    flat = np.array([g for i, x in enumerate(lists) if rows[i] for g in x], dtype=np.float64) / 1e6
    assert np.array_equal(gaps.values(rows), flat)
    for scale in (1000, 1.0):
        assert gap_distribution(gaps.summary(rows, scale)) == distribution(flat, scale)
    if flat.size:
        summary = gaps.summary(rows, 1.0)
        for q in (0.0, 12.5, 99.9, 100.0):
            assert float(summary.quantiles(q / 100)[0]) == float(np.percentile(flat, q))
        p = np.linspace(0, 1, min(400, flat.size))
        assert np.array_equal(summary.quantiles(p), np.quantile(flat, p))
    per_request = np.bincount(np.repeat(np.arange(len(lists)), [len(x) for x in lists]),
                              weights=np.array([g for x in lists for g in x], dtype=np.float64) / 1e6,
                              minlength=len(lists))  # fmt: skip
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(gaps.lengths > 0, per_request / np.maximum(gaps.lengths, 1), np.nan)
    assert np.array_equal(gaps.mean_per_request(), expected, equal_nan=True)


def test_labels_compare_like_a_string_array():
    column = pa.chunked_array([["ok", "timeout", None], ["ok", "", "dropped"]])
    strings = column.to_numpy(zero_copy_only=False).astype(str)
    got = labels(ColumnSource(pa.table({"state": column})), "state")
    assert got.codes.dtype == np.uint8
    assert np.array_equal(got == "ok", strings == "ok")
    assert np.array_equal(got != "", strings != "")
    assert np.array_equal(got.isin(["timeout", "None"]), np.isin(strings, ["timeout", "None"]))
    assert got.distinct() == sorted(set(strings.tolist()))
    assert got[got != "ok"].counts() == {
        s: int(n) for s, n in zip(*np.unique(strings[strings != "ok"], return_counts=True))
    }
    renamed = got.replace("", "ok")  # two codes may now read the same
    assert renamed.counts()["ok"] == 3 and np.array_equal(renamed == "ok", np.isin(strings, ["ok", ""]))


def test_missing_columns_read_as_defaults():
    source = ColumnSource(pa.table({"id": [1, 2]}))
    assert source.numpy("attempts", lambda b: b.to_numpy()) is None
    assert np.isnan(source.floats("input_units")).all() and source.floats("input_units").size == 2
    assert labels(source, "kind").distinct() == [""]
    assert isinstance(labels(source, "kind"), Labels)


def test_a_run_directory_is_read_by_column_and_an_unsorted_file_whole(tmp_path):
    buffer = RecordBuffer()
    for i in range(4):
        end = None if i == 1 else 100 + i
        buffer.add(RecordMeta(id=i, intended_ns=i, warmup=False), Outcome(state=State.OK, sent_ns=i, end_ns=end))
    table = buffer.take()
    pq.write_table(table, tmp_path / "records.parquet", row_group_size=3)
    source = ColumnSource(tmp_path)
    assert source.path is not None and source.rows == 4
    assert np.array_equal(source.floats("end_ns"), [100, np.nan, 102, 103], equal_nan=True)
    pq.write_table(table.take([1, 0, 2, 3]), tmp_path / "records.parquet")
    unsorted = ColumnSource(tmp_path)
    assert unsorted.path is None  # not as a merge writes it: read whole, ordered by id
    assert np.array_equal(unsorted.floats("end_ns"), [100, np.nan, 102, 103], equal_nan=True)


def test_a_table_without_a_column_every_record_has_is_named_not_a_crash_later():
    """``column`` is for what every version of the records holds (times, warm-up): a table without
    one is not surgelab's records, said with the column's name (``numpy`` gives None for newer ones)."""
    source = ColumnSource(pa.table({"id": pa.array([1, 2], type=pa.int64())}))
    assert source.numpy("end_ns", plain) is None
    with pytest.raises(ValueError, match="no end_ns column"):
        source.column("end_ns", plain)
    assert source.column("id", plain).tolist() == [1, 2]
