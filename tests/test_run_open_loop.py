"""An open-loop run against the timed scripted server: the numbers match the known truth.

One steady run (constant arrivals at 10 req/s for 4 s, the first second warm-up, each request
200 ms to the first token and then 15 gaps of 20 ms) is shared by the checks in this module.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from surgelab.load.phases import open_loop_offsets
from surgelab.metrics.rundir import read_json
from surgelab.metrics.store import RECORDS_FILE

RATE, DURATION, WARMUP, TOKENS = 10, 4.0, 1.0, 16
TTFT_S, ITL_S = 0.2, 0.02  # the timed server's script
E2E_S = TTFT_S + (TOKENS - 1) * ITL_S


@pytest.fixture(scope="module")
def steady(timed_server, tmp_path_factory, scenario_for, run, reconciled):
    assert (timed_server.ttft, timed_server.itl) == (TTFT_S, ITL_S)
    scenario = scenario_for(
        timed_server.url,
        load={"rate": RATE, "arrival": "constant", "duration": DURATION, "warmup": WARMUP},
        workload={"prompt_tokens": 32, "output_tokens": TOKENS},
        seed=3,
    )
    ticks = []
    result = run(scenario, tmp_path_factory.mktemp("steady") / "run", on_tick=ticks.append)
    table = reconciled(result.summary, result.run_dir)
    return scenario, result, table, ticks


def test_ttft_and_itl_match_the_server_script(steady):
    _, result, _, _ = steady
    s = read_json(result.run_dir / "summary.json")
    assert s["latency_ms"]["ttft"]["p50"] == pytest.approx(TTFT_S * 1000, abs=5)
    assert s["service_latency_ms"]["ttft"]["p50"] == pytest.approx(TTFT_S * 1000, abs=5)
    assert s["latency_ms"]["itl"]["p50"] == pytest.approx(ITL_S * 1000, abs=2)
    assert s["latency_ms"]["itl"]["count"] == 30 * (TOKENS - 1)
    assert s["latency_ms"]["tpot"]["p50"] == pytest.approx(ITL_S * 1000, abs=2)
    assert s["latency_ms"]["e2e"]["p50"] == pytest.approx(E2E_S * 1000, abs=10)
    assert s["service_latency_ms"]["e2e"]["p50"] == pytest.approx(E2E_S * 1000, abs=10)
    # nothing arrives before the server sends it
    assert s["service_latency_ms"]["ttft"]["min"] >= TTFT_S * 1000
    assert s["latency_ms"]["e2e"]["min"] >= E2E_S * 1000


def test_every_scheduled_request_is_one_row(steady):
    _, result, table, _ = steady
    s = result.summary
    assert s["requests"]["scheduled"] == RATE * DURATION == table.num_rows
    assert s["requests"]["ok"] == table.num_rows
    assert pq.read_table(result.run_dir / RECORDS_FILE).num_rows == table.num_rows
    assert table["usage_source"].to_pylist() == ["server"] * table.num_rows
    assert table["output_tokens"].to_pylist() == [TOKENS] * table.num_rows
    assert all(len(itl) == TOKENS - 1 for itl in table["itl_us"].to_pylist())


def test_records_keep_the_intended_schedule_and_honest_timestamps(steady):
    scenario, result, table, _ = steady
    intended = np.array(table["intended_ns"].to_pylist())
    assert np.array_equal(intended, open_loop_offsets(scenario))
    sent = np.array(table["sent_ns"].to_pylist())
    first_byte = np.array(table["first_byte_ns"].to_pylist())
    first_token = np.array(table["first_token_ns"].to_pylist())
    end = np.array(table["end_ns"].to_pylist())
    assert np.all(intended <= sent) and np.all(sent <= first_byte) and np.all(first_byte <= first_token)
    assert np.all(first_token <= end)
    lag_ms = (sent - intended) / 1e6
    assert result.summary["schedule_lag_ms"]["max"] == pytest.approx(lag_ms[~table["warmup"].to_numpy()].max())
    assert result.summary["validity"]["valid"], result.summary["validity"]


def test_warmup_is_recorded_but_not_measured(steady):
    _, result, table, _ = steady
    warm = table["warmup"].to_numpy(zero_copy_only=False)
    intended = table["intended_ns"].to_numpy()
    assert np.array_equal(warm, intended < WARMUP * 1e9)
    assert warm.sum() == RATE * WARMUP
    s = result.summary
    assert s["requests"]["warmup"] == RATE * WARMUP
    assert s["requests"]["measured"] == RATE * (DURATION - WARMUP)
    assert s["latency_ms"]["ttft"]["count"] == s["latency_ms"]["e2e"]["count"] == RATE * (DURATION - WARMUP)
    assert s["duration_s"] == pytest.approx(DURATION - WARMUP)


def test_throughput_is_successes_ending_in_the_window(steady):
    _, result, table, _ = steady
    end = table["end_ns"].to_numpy() / 1e9
    ok = table["state"].to_numpy(zero_copy_only=False) == "ok"
    in_window = ok & (end >= WARMUP) & (end <= DURATION)  # warm-up requests that finish in the window count
    window = DURATION - WARMUP
    s = result.summary
    assert s["throughput"]["requests_per_s"] == pytest.approx(in_window.sum() / window)
    assert s["throughput"]["output_tokens_per_s"] == pytest.approx(in_window.sum() * TOKENS / window)
    assert s["goodput"]["requests_per_s"] == s["throughput"]["requests_per_s"]  # no SLO set


def test_littles_law_holds_on_a_steady_run(steady):
    _, result, _, _ = steady
    c = result.summary["concurrency"]
    assert c["mean_in_flight"] == pytest.approx(RATE * E2E_S, rel=0.1)
    assert c["littles_law_estimate"] == pytest.approx(c["mean_in_flight"], rel=0.1)
    assert c["arrival_rate"] == pytest.approx(RATE, rel=0.1)


def test_run_directory_contents(steady):
    _, result, _, _ = steady
    names = {p.name for p in result.run_dir.iterdir()}
    assert names == {"scenario.yaml", "run.json", "records.parquet", "summary.json"}
    saved = read_json(result.run_dir / "summary.json")
    assert saved == result.summary
    assert saved["stop_reason"] == result.stop_reason == "completed"
    info = read_json(result.run_dir / "run.json")
    assert info["stop_reason"] == "completed" and info["wall_s"] >= DURATION


def test_live_ticks_follow_the_run(steady):
    _, result, _, ticks = steady
    assert len(ticks) >= 2 * DURATION - 1
    last = ticks[-1]
    assert last.ok == result.summary["requests"]["ok"] and last.in_flight == 0
    assert last.scheduled == result.summary["requests"]["scheduled"]
    assert any(t.in_flight > 0 for t in ticks)
    assert last.ttft_p50_ms == pytest.approx(result.summary["latency_ms"]["ttft"]["p50"], abs=0.01)


def _render(renderable, width: int = 160) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    console.print(renderable)
    return console.file.getvalue()


def test_final_summary_table_shows_the_measured_numbers(steady):
    from surgelab.report.terminal import summary_table

    _, result, _, _ = steady
    s = result.summary
    text = _render(summary_table(s))
    assert f"{s['requests']['scheduled']} scheduled · {s['requests']['ok']} ok" in text
    ms = lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.1f}"  # noqa: E731  # whole ms past 100, as printed
    assert ms(s["latency_ms"]["ttft"]["p50"]) in text and ms(s["latency_ms"]["itl"]["p99"]) in text
    assert "TTFT (service)" in text
    narrow = _render(summary_table(s), width=80)  # at 80 columns: each latency row on one line
    rows = [line for line in narrow.splitlines() if line.strip().startswith(("TTFT", "ITL", "TPOT", "E2E"))]
    assert len(rows) == 6 and all(line.rstrip().endswith(f"{s['latency_ms']['ttft']['count']:,}") for line in rows[:1])
    assert ("INVALID" in text) is not s["validity"]["valid"]
    assert f"{s['concurrency']['mean_in_flight']:.2f} measured" in text


def test_live_view_frame_renders(steady):
    from surgelab.report.terminal import render_snapshot

    _, _, _, ticks = steady
    frame = ticks[len(ticks) // 2]
    text = _render(render_snapshot(frame))
    assert "surgelab run" in text and "in flight" in text
    assert f"{frame.ok:,}" in text


def test_a_client_that_falls_behind_says_so_and_does_not_shift_the_schedule(zero_server, scenario_for, run, reconciled,
                                                                             tmp_path):  # fmt: skip
    """Block the event loop for 300 ms twice a second: sends are late, never re-timed."""
    import time

    scenario = scenario_for(zero_server.url, load={"rate": 40, "arrival": "poisson", "duration": "2s"}, seed=8)
    result = run(scenario, tmp_path / "run", on_tick=lambda _snapshot: time.sleep(0.3))
    table = reconciled(result.summary, result.run_dir)
    intended = table["intended_ns"].to_numpy()
    assert np.array_equal(intended, open_loop_offsets(scenario))  # every request kept its intended time
    lag_ms = (table["sent_ns"].to_numpy() - intended) / 1e6
    assert lag_ms.max() >= 200  # requests due during a block went out when it ended...
    assert np.median(lag_ms) < 5  # ...and the rest on time
    s = result.summary
    assert s["schedule_lag_ms"]["max"] == pytest.approx(lag_ms.max())
    assert s["validity"]["valid"] is False
    assert any("fell behind" in reason for reason in s["validity"]["reasons"])
    # felt latency includes the lag, service latency does not
    assert s["latency_ms"]["e2e"]["max"] >= 200
    assert s["service_latency_ms"]["e2e"]["p50"] < 5


def test_steady_poisson_load_is_on_schedule(zero_server, scenario_for, run, reconciled, tmp_path):
    scenario = scenario_for(zero_server.url, load={"rate": 50, "arrival": "poisson", "duration": "2s"}, seed=2)
    result = run(scenario, tmp_path / "run")
    table = reconciled(result.summary, result.run_dir)
    assert np.array_equal(table["intended_ns"].to_numpy(), open_loop_offsets(scenario))
    assert result.summary["schedule_lag_ms"]["p99"] < 50  # the default validity bound (about 1 ms when idle)
    assert result.summary["validity"]["valid"]


DATA_KEYED = {"tokens.usage_source", "requests.by_state"}  # keys depend on what happened


def _documented_fields() -> list[str]:
    """Dotted field names from the table under '## Fields' in docs/summary.md."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "summary.md").read_text()
    section = doc.split("## Fields", 1)[1].split("\n## ", 1)[0]
    fields = []
    for line in section.splitlines():
        if not line.startswith("| `") or "absent without" in line:  # optional blocks, e.g. telemetry
            continue
        parent = ""
        for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
            name = name.removesuffix("[]").removesuffix(".*").split(".<")[0]  # `by_phase.<name>`: keyed by data
            if "." not in name and parent:
                name = f"{parent}.{name}"  # `requests.ok` / `failed`: a sibling
            if m := re.fullmatch(r"(.+)\.\{(.+)\}", name):
                parent = m[1]
                fields.append(parent)
                if parent not in DATA_KEYED:
                    fields += [f"{parent}.{child.strip()}" for child in m[2].split(",")]
            else:
                parent = name.rpartition(".")[0]
                fields.append(name)
    return fields


def test_summary_has_every_documented_field(steady):
    _, result, _, _ = steady
    fields = _documented_fields()
    assert len(fields) >= 50
    for field in fields:
        node = result.summary
        for part in field.split("."):
            assert isinstance(node, dict) and part in node, f"documented field {field} missing from summary.json"
            node = node[part]
    stats = {"count", "mean", "min", "p50", "p90", "p95", "p99", "max"}
    for block in ("ttft", "itl", "tpot", "e2e"):  # TTFT and E2E say how many of their values are waits cut off
        assert set(result.summary["latency_ms"][block]) == stats | ({"censored"} if block in ("ttft", "e2e") else set())
    main = result.summary["by_phase"]["main"]  # one phase: the same figures as the run
    assert main["requests"]["ok"] == result.summary["requests"]["ok"] - result.summary["requests"]["warmup"]
    assert main["latency_ms"]["ttft"]["p50"] == result.summary["latency_ms"]["ttft"]["p50"]
    assert main["throughput"]["requests_per_s"] == pytest.approx(result.summary["throughput"]["requests_per_s"])
