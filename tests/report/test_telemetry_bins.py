"""Server telemetry in 1 s windows: scrapes that drift against the grid leave no false gap (issue 30:
every server series had a gap at 17–18 s though the scrapes were 1.00 s apart and none was missing)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from surgelab.report.telemetry import telemetry_series
from surgelab.telemetry.samples import TELEMETRY_SCHEMA


def _scrapes(path, times_s: list[float]) -> None:
    rows = {"seq": list(range(len(times_s))), "t_ns": [round(t * 1e9) for t in times_s], "source": ["vllm"] * len(times_s),
            "metric": ["vllm:num_requests_running"] * len(times_s), "labels": [""] * len(times_s),
            "value": [float(i % 7) for i in range(len(times_s))], "kind": ["gauge"] * len(times_s)}  # fmt: skip
    pq.write_table(pa.Table.from_pydict(rows, schema=TELEMETRY_SCHEMA), path / "telemetry.parquet")


def test_scrapes_a_hair_over_a_second_apart_leave_no_empty_window(tmp_path):
    times = [0.9995 + k * 1.0001 for k in range(25)]  # 4.9999 s, then 6.0000 s: no scrape in 5–6 s
    empty = [i for i in range(1, 25) if not any(i <= t < i + 1 for t in times)]
    assert empty == [5]
    _scrapes(tmp_path, times)
    [series] = telemetry_series(tmp_path, 26.0)["series"].values()
    assert all(v is not None for v in series[1:25]), series  # was None at 5 s
    assert series[5] == series[4]  # the gauge held its last scraped value, as it does between scrapes


def test_a_missed_scrape_is_still_a_gap(tmp_path):
    times = [0.5 + k for k in range(25) if k not in (10, 11, 12)]  # three scrapes missing: 10.5–12.5 s
    _scrapes(tmp_path, times)
    [series] = telemetry_series(tmp_path, 26.0)["series"].values()
    assert series[10:13] == [None, None, None] and series[9] is not None and series[13] is not None
