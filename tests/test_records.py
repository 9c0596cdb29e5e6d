"""Per-request records: buffer → Arrow table round trip, crash-safe parts, merging."""

from __future__ import annotations

from array import array

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from surgelab.metrics.record import RECORD_SCHEMA, Outcome, State
from surgelab.metrics.store import (
    PARTS_DIR,
    RECORDS_FILE,
    RecordBuffer,
    RecordMeta,
    RecordStore,
    merge_parts,
    read_records,
)


def _ok(i: int, tokens: list[int]) -> Outcome:
    return Outcome(state=State.OK, sent_ns=i * 1000 + 5, first_byte_ns=i * 1000 + 50,
                   first_token_ns=tokens[0] if tokens else None, end_ns=(tokens[-1] if tokens else i * 1000) + 7,
                   prompt_tokens=16, output_tokens=len(tokens), usage_source="server", http_status=200,
                   token_ns=array("q", tokens))  # fmt: skip


def _filled(ids: range) -> RecordBuffer:
    buffer = RecordBuffer()
    for i in ids:
        meta = RecordMeta(id=i, intended_ns=i * 1000, warmup=i < 2, user=i % 3)
        if i % 4 == 3:
            out = Outcome(state=State.DROPPED, error="max_in_flight (2) reached")
        elif i % 4 == 2:
            out = Outcome(sent_ns=i * 1000, http_status=500)
            out.fail(State.HTTP_ERROR, "HTTP 500: " + "x" * 1000, i * 1000 + 99)
        else:
            base = 10_000_000 * i
            out = _ok(i, [base + k * 20_000_000 + (k % 3) * 1000 for k in range(i % 5)])
        buffer.add(meta, out)
    return buffer


def test_buffer_round_trip_keeps_every_field_and_the_itl_lists():
    buffer = _filled(range(12))
    assert len(buffer) == 12
    table = buffer.take()
    assert len(buffer) == 0 and buffer.take().num_rows == 0
    assert table.schema.equals(RECORD_SCHEMA, check_metadata=True)
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == list(range(12))
    for r in rows:
        i = r["id"]
        assert r["warmup"] is (i < 2)
        assert r["user"] == i % 3
        assert r["intended_ns"] == i * 1000
        assert r["phase"] == "main" and r["request_class"] == "default" and r["worker"] == 0
        if i % 4 == 3:
            assert r["state"] == "dropped" and r["sent_ns"] is None and r["end_ns"] is None
            assert r["itl_us"] == [] and r["usage_source"] == "none"
        elif i % 4 == 2:
            assert r["state"] == "http_error" and r["http_status"] == 500
            assert r["end_ns"] == i * 1000 + 99
            assert len(r["error"]) == 500  # truncated
        else:
            tokens = [10_000_000 * i + k * 20_000_000 + (k % 3) * 1000 for k in range(i % 5)]
            assert r["state"] == "ok" and r["output_tokens"] == len(tokens)
            assert r["itl_us"] == [(b - a) // 1000 for a, b in zip(tokens, tokens[1:])]
            assert r["first_token_ns"] == (tokens[0] if tokens else None)


def test_parquet_round_trip(tmp_path):
    store = RecordStore(tmp_path)
    buffer = _filled(range(10))
    table = buffer.take()
    store.write(table)
    store.write(buffer.take())  # empty: no file
    assert len(list((tmp_path / PARTS_DIR).iterdir())) == 1
    assert read_records(tmp_path).equals(table)
    store.finalize()
    assert not (tmp_path / PARTS_DIR).exists()
    assert pq.read_table(tmp_path / RECORDS_FILE).equals(table)
    assert read_records(tmp_path).equals(table)


def test_parts_are_readable_before_merging_and_merge_sorts_by_id(tmp_path):
    store = RecordStore(tmp_path)
    for ids in (range(5, 10), range(0, 5), range(10, 13)):
        store.write(_filled(ids).take())
    assert store.rows_written == 13
    for part in sorted((tmp_path / PARTS_DIR).glob("part-*.parquet")):
        assert pq.read_table(part).num_rows > 0
    assert read_records(tmp_path)["id"].to_pylist() == list(range(13))
    merge_parts(tmp_path)
    assert pq.read_table(tmp_path / RECORDS_FILE)["id"].to_pylist() == list(range(13))


def test_a_crash_leaves_parts_and_a_torn_write_is_skipped(tmp_path):
    store = RecordStore(tmp_path)
    store.write(_filled(range(4)).take())
    parts = tmp_path / PARTS_DIR
    (parts / "part-000001.tmp").write_bytes(b"PAR1 half a file")  # killed mid-write
    (parts / "part-000002.parquet").write_bytes(b"PAR1 garbage")  # unreadable part
    assert read_records(tmp_path)["id"].to_pylist() == [0, 1, 2, 3]
    merge_parts(tmp_path)  # recovering a crashed run
    assert not parts.exists()
    assert read_records(tmp_path)["id"].to_pylist() == [0, 1, 2, 3]


def test_merge_interrupted_before_removing_parts_does_not_duplicate(tmp_path):
    store = RecordStore(tmp_path)
    store.write(_filled(range(3)).take())
    pq.write_table(read_records(tmp_path), tmp_path / RECORDS_FILE)  # merged, parts not yet removed
    store.write(_filled(range(3, 5)).take())
    assert read_records(tmp_path)["id"].to_pylist() == [0, 1, 2, 3, 4]


def test_empty_run_reads_as_an_empty_table(tmp_path):
    table = read_records(tmp_path)
    assert table.num_rows == 0 and table.schema.equals(RECORD_SCHEMA)
    merge_parts(tmp_path)
    assert pq.read_table(tmp_path / RECORDS_FILE).num_rows == 0


@pytest.mark.parametrize("state", list(State))
def test_every_state_fits_the_schema(state):
    buffer = RecordBuffer()
    buffer.add(RecordMeta(id=0, intended_ns=0, warmup=False), Outcome(state=state))
    assert buffer.take()["state"].to_pylist() == [state.value]


def test_schema_is_versioned():
    assert RECORD_SCHEMA.metadata[b"surgelab.record_version"] == b"1"
    assert RECORD_SCHEMA.field("itl_us").type == pa.list_(pa.int32())


def test_every_column_is_documented_with_its_type():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "records.md").read_text()
    documented = dict(re.findall(r"^\| `(\w+)` \| ([\w<>]+) \|", doc, flags=re.M))
    actual = {f.name: str(f.type).replace("item: ", "") for f in RECORD_SCHEMA}
    assert documented == actual


def test_merge_streams_overlapping_out_of_order_parts_into_small_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr("surgelab.metrics.store._ROWS_PER_GROUP", 7)
    table = _filled(range(60)).take()
    store = RecordStore(tmp_path)
    for ids in ([5, 1, 9, 3], [0, 2, 4], [31, 12, 11], [10, 8, 6, 7], *[[i, i + 1] for i in range(13, 30, 2)]):
        store.write(table.take(ids))  # completions arrive out of order, and parts overlap in id
    store.write(table.slice(32))
    merge_parts(tmp_path)
    merged = pq.ParquetFile(tmp_path / RECORDS_FILE)
    assert merged.read().equals(table)
    assert merged.metadata.num_row_groups > 1  # written a group at a time
    assert not (tmp_path / PARTS_DIR).exists()


def test_merge_after_an_interrupted_merge_keeps_each_row_once(tmp_path, monkeypatch):
    monkeypatch.setattr("surgelab.metrics.store._ROWS_PER_GROUP", 4)
    table = _filled(range(20)).take()
    pq.write_table(table.slice(0, 12), tmp_path / RECORDS_FILE, row_group_size=5)  # merged, parts not yet removed
    store = RecordStore(tmp_path)
    store.write(table.slice(8, 4))  # already in the merged file
    store.write(table.slice(12))
    merge_parts(tmp_path)
    assert pq.read_table(tmp_path / RECORDS_FILE).equals(table)
