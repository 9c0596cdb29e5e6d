"""The simulator's bulk recorder writes exactly what RecordBuffer writes."""

from __future__ import annotations

from array import array

import pytest

from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta
from surgelab.sim.recorder import Recorder


@pytest.mark.parametrize("gap_rows", [4096, 2, 1])  # inter-token gaps computed for this many requests at a time
def test_bulk_table_equals_record_buffer(monkeypatch, gap_rows):
    import surgelab.sim.recorder as recorder

    monkeypatch.setattr(recorder, "_GAP_ROWS", gap_rows)
    rows = []
    for i, times in enumerate([[], [5_000], [1_000, 4_000, 4_000, 9_500], [], [7, 2_007_000], [3_000, 3_500, 4_000]]):
        meta = RecordMeta(id=i, intended_ns=i * 10, warmup=i == 0, user=i % 2, tier="paid" if i % 3 else "free")
        state = State.OK if times else State.HTTP_ERROR
        out = Outcome(
            state=state,
            sent_ns=i * 10,
            end_ns=i * 10 + 99,
            token_ns=array("q", times),
            http_status=200 if times else 429,
        )
        rows.append((meta, out))
    buffer = RecordBuffer()
    for meta, out in rows:
        buffer.add(meta, out)
    expected = buffer.take()
    got = Recorder._table([m for m, _ in rows], [o for _, o in rows])
    assert got.equals(expected)


@pytest.mark.parametrize("windows", [64, 1, 0])  # rows moved where batches overlap; beyond the limit, all sorted
def test_records_written_in_batches_come_out_sorted_by_id_as_one(tmp_path, monkeypatch, windows):
    """Batches (flushed as the run goes) are joined, sorted by id and written: the same table as one batch."""
    import pyarrow.parquet as pq

    import surgelab.sim.recorder as recorder

    monkeypatch.setattr(recorder, "_MAX_WINDOWS", windows)
    rows = []
    for k, i in enumerate([7, 3, 11, 0, 5, 9, 1, 4, 12, 13, 16, 14, 15, 17]):  # finish order is not id order
        first = 1_000_000 * k
        times = [first + j * 2_500_000_123 for j in range(k % 4)]  # gaps of 2.5 s: more ns than an int32 holds
        meta = RecordMeta(id=i, intended_ns=first, warmup=False)
        rows.append((meta, Outcome(sent_ns=first, end_ns=first + 1, token_ns=array("q", times))))
    monkeypatch.setattr(recorder, "_FLUSH_ROWS", 3)
    batched = Recorder(tmp_path / "batched")
    (tmp_path / "batched").mkdir()
    for meta, out in rows:
        batched(meta, out)
    got = batched.close()
    rows.sort(key=lambda r: r[0].id)
    buffer = RecordBuffer()
    for meta, out in rows:
        buffer.add(meta, out)
    expected = buffer.take()
    assert got.equals(expected)
    assert pq.read_table(tmp_path / "batched" / "records.parquet").equals(expected)
    assert got["itl_us"].to_pylist()[3] == [2_500_000, 2_500_000]  # id 4, the 8th to finish: k = 7, 3 tokens


def test_sim_rows_make_the_table_of_record_meta_and_outcome():
    """MetaRow and SimOutcome (what the simulator makes per request) give RecordBuffer's table of the full objects."""
    from dataclasses import fields

    from surgelab.metrics.store import MetaRow
    from surgelab.sim.request import SimOutcome

    assert MetaRow._fields == tuple(f.name for f in fields(RecordMeta))
    assert MetaRow(1, 2, False) == tuple(getattr(RecordMeta(1, 2, False), f) for f in MetaRow._fields)  # defaults
    buffer, metas, outs = RecordBuffer(), [], []
    for i, times in enumerate([[1_000, 4_000], [], [7, 2_007_000, 2_007_001]]):
        meta = MetaRow(i, i * 10, i == 1, 3, "p", "c", "paid", 5, 1, "chat")
        out = SimOutcome(i * 10, State.OK if times else State.DROPPED, None if times else "max_in_flight (1) reached")
        out.token_ns.extend(times)
        if times:
            out.first_token_ns, out.end_ns = times[0], times[-1] + 1
            out.prompt_tokens, out.output_tokens = 40, len(times)
            out.usage_source, out.http_status = "server", 200
        full = Outcome(**{k: getattr(out, k) for k in SimOutcome.__slots__})
        buffer.add(RecordMeta(*meta), full)
        metas.append(meta)
        outs.append(out)
    expected = buffer.take()
    assert Recorder._table(metas, outs).equals(expected)
    mixed = [outs[0], Outcome(**{k: getattr(outs[1], k) for k in SimOutcome.__slots__}), outs[2]]
    assert Recorder._table(metas, mixed).equals(expected)
