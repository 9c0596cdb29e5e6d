"""The simulator's bulk recorder writes exactly what RecordBuffer writes."""

from __future__ import annotations

from array import array

from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta
from surgelab.sim.recorder import Recorder


def test_bulk_table_equals_record_buffer():
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
