"""Observers fed from the records as they land in the run directory.

A shard in another process (a worker, a Ray actor) records its requests there, not here: the
coordinator reads each part file once it is whole and hands every row to the observers as the
``(RecordMeta, Outcome)`` pair a shard in this process would have handed them, token times
rebuilt from the first token and the recorded gaps. They see a request a flush later than
its own process did, and every request exactly once.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import fields
from itertools import accumulate
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import PARTS_DIR, RecordMeta
from surgelab.runner.protocols import Observer

__all__ = ["PartsFeed", "observations"]

_META = tuple(f.name for f in fields(RecordMeta))
_OUTCOME = tuple(f.name for f in fields(Outcome) if f.name not in ("state", "token_ns"))


def observations(table: pa.Table) -> Iterator[tuple[RecordMeta, Outcome]]:
    """Each recorded row as what its shard's observers saw (null columns keep the Outcome's defaults)."""
    names = set(table.column_names)
    meta_cols = [n for n in _META if n in names]
    outcome_cols = [n for n in _OUTCOME if n in names]
    for row in table.select([*meta_cols, *outcome_cols, "state", "itl_us"]).to_pylist():
        meta = RecordMeta(**{n: row[n] for n in meta_cols})
        out = Outcome(state=State(row["state"]), **{n: row[n] for n in outcome_cols if row[n] is not None})
        first = row["first_token_ns"]
        if first is not None:
            out.token_ns = array("q", accumulate((gap * 1000 for gap in row["itl_us"] or ()), initial=first))
        yield meta, out


class PartsFeed:
    """Hands the observers every record part file written since the last ``poll``."""

    def __init__(self, run_dir: Path, observers: Sequence[Observer]) -> None:
        self.parts = Path(run_dir) / PARTS_DIR
        self.observers = observers
        self._seen: set[str] = set()

    def poll(self) -> int:
        """Feed the new parts; the rows fed. A part is read once it is whole (written as ``.tmp``, then renamed)."""
        if not self.observers or not self.parts.is_dir():
            return 0
        fed = 0
        for path in sorted(self.parts.glob("*.parquet")):
            if path.name in self._seen:
                continue
            self._seen.add(path.name)
            for meta, out in observations(pq.read_table(path)):
                for observer in self.observers:
                    observer.observe(meta, out)
                fed += 1
        return fed
