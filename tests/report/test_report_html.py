"""report.html: written by every run, rebuilt by ``surgelab report``, drawn offline in a real Chromium."""

from __future__ import annotations

import json
import shutil
import sys
from io import StringIO
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from rich.console import Console

from surgelab.report.model import REPORT_VERSION, build_report_data
from surgelab.sweep.result import read_sweep
from surgelab.sweep.table import print_sweep

RUN_CHARTS = {
    "chart-load", "chart-inflight", "chart-ttft-time", "chart-e2e-time", "chart-cdf-ttft", "chart-cdf-itl",
    "chart-cdf-e2e", "chart-errors", "chart-lag", "chart-by_class", "chart-by_tier", "chart-slo",
    "chart-telemetry", "chart-telemetry-overlay", "chart-tokens", "chart-server-ttft", "chart-server-e2e",
}  # fmt: skip


@pytest.fixture(scope="session")
def run_dir(tiny_server, tmp_path_factory, run_maker) -> Path:
    """A 3 s run of two request classes in two tiers, scraping the server's /metrics."""
    tmp = tmp_path_factory.mktemp("report")
    return run_maker(tmp, tiny_server, "run", "--scrape", tiny_server.root_url + "/metrics")


def test_every_run_writes_a_self_contained_report(run_dir):
    html = (run_dir / "report.html").read_text()
    assert "<script src=" not in html and "cdn" not in html.lower().split("plotly.js (basic")[0]
    assert "plotly.js (basic - minified) v" in html  # the library itself is inside: the partial bundle
    assert 'id="report-data"' in html
    size = (run_dir / "report.html").stat().st_size
    assert size <= 1.5e6, f"report.html is {size / 1e6:.2f} MB"  # was 4.8 MB with the full plotly.js


def test_report_model_agrees_with_the_summary(run_dir):
    data = build_report_data(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert data.version == REPORT_VERSION and data.kind == "run"
    ts = data.timeseries
    n = len(ts["t"])
    assert all(len(ts[k]) == n for k in ("arrivals_per_s", "sends_per_s", "throughput_per_s", "in_flight", "littles_law"))
    assert sum(ts["arrivals_per_s"]) == summary["requests"]["scheduled"]
    assert ts["target"]["unit"] == "req/s" and max(ts["target"]["level"]) == 30
    assert set(data.breakdowns["by_class"]) == {"chat", "summarize"}
    assert set(data.breakdowns["by_tier"]) == {"free", "paid"}
    cards = {c["id"]: c["value"] for c in data.cards}
    assert cards["throughput"] == summary["throughput"]["requests_per_s"]
    assert cards["ttft_p99"] == summary["latency_ms"]["ttft"]["p99"]
    # the decode figures and the request counts a reader looks for (issue 30: absent though the run streamed)
    for key in ("itl", "tpot"):
        assert cards[f"{key}_p50"] == summary["latency_ms"][key]["p50"] and cards[f"{key}_p99"] == summary["latency_ms"][key]["p99"]
    req = summary["requests"]
    notes = {c["id"]: c.get("note") for c in data.cards}
    assert cards["requests"] == req["measured"] and notes["requests"].startswith(f"{req['ok']:,} ok · {req['failed']:,} failed")
    # tokens/s over time: every output token of a success, in the second it ended
    records = pq.read_table(run_dir / "records.parquet", columns=["state", "output_tokens"]).to_pylist()
    ok_tokens = sum(r["output_tokens"] or 0 for r in records if r["state"] == "ok")
    assert abs(sum(ts["output_tokens_per_s"]) - ok_tokens) < 1
    assert data.telemetry is not None and any("running" in name for name in data.telemetry["series"])
    assert len(data.cdfs["ttft_ms"]["x"]) == min(400, summary["latency_ms"]["ttft"]["count"])
    json.loads(data.to_json())  # strict JSON: no NaN


def test_an_unreadable_input_is_named_not_silently_left_out(run_dir, tmp_path):
    """A broken telemetry.parquet dropped the server section without a word."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "telemetry.parquet").write_bytes(b"not parquet")
    data = build_report_data(copy)
    assert data.telemetry is None
    [problem] = data.problems
    assert problem.startswith("telemetry.parquet cannot be read (") and problem.endswith("the server telemetry section is left out")
    assert build_report_data(run_dir).problems == []


def test_report_loads_offline_and_every_chart_has_its_points(run_dir, browser, screenshot_dir, narrow):
    ctx = browser(offline=True)
    requests: list[str] = []
    ctx.on("request", lambda r: requests.append(r.url))
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((run_dir / "report.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    assert errors == []
    assert [u for u in requests if not u.startswith("file:")] == []
    charts = page.evaluate("window.SURGELAB_CHARTS")
    assert set(charts) >= RUN_CHARTS, RUN_CHARTS - set(charts)
    for chart_id, chart in charts.items():
        assert chart["points"] and all(p > 0 for p in chart["points"]), (chart_id, chart)
    model = page.evaluate("window.SURGELAB_REPORT")
    n = len(model["timeseries"]["t"])
    assert charts["chart-load"]["points"] == [n] * 4  # target, arrivals, sent, throughput
    assert charts["chart-tokens"]["points"] == [n]  # computed in the model, and drawn
    assert charts["chart-by_class"]["points"] == [2, 2, 2, 2]
    # the plotted data are the model's: plotly's own trace holds them
    plotted = page.evaluate("document.getElementById('chart-cdf-e2e').data[0].x.length")
    assert plotted == len(model["cdfs"]["e2e_ms"]["x"])
    assert page.inner_text("#card-validity .value") == "valid"
    # sample counts: beside every percentile card, and per-second percentiles from too few requests are
    # drawn grey, apart from the rest (30 requests a second: no window has the 500 a P99 needs)
    summary = model["summary"]
    count = summary["latency_ms"]["ttft"]["count"]
    assert page.inner_text("#card-ttft_p99 .n") == f"n = {count:,} · too few for a P99"
    assert "sparse" in page.get_attribute("#card-ttft_p99", "class").split()
    assert page.inner_text("#card-ttft_p50 .n") == f"n = {count:,}"
    assert page.inner_text("#card-tpot_p99 .label") == "TPOT P99"
    assert page.inner_text("#card-requests .value") == f"{summary['requests']['measured']:,}"
    traces = charts["chart-ttft-time"]["traces"]
    assert "p99 (sparse: n < 500)" in traces and "p99" not in traces and "p50" in traces
    assert sum(model["timeseries"]["ttft_ms"]["n"]) == summary["requests"]["ok"]
    # every axis titled, and no chart narrower than its card
    axes = page.evaluate("""Array.from(document.querySelectorAll('.chart')).map(d => ({id: d.id,
        x: d._fullLayout.xaxis.title.text, y: d._fullLayout.yaxis.title.text,
        y2: d._fullLayout.yaxis2 ? d._fullLayout.yaxis2.title.text : null,
        plot: d.querySelector('.main-svg').getBoundingClientRect().width, card: d.clientWidth}))""")
    for a in axes:
        assert a["x"] and a["y"] and a["y2"] != "", a
        assert a["plot"] >= a["card"] - 2, a
    # the telemetry overlay: readable legends, the 0–1 KV-cache fraction on its own right axis
    overlay = page.evaluate("document.getElementById('chart-telemetry-overlay').data.map(t => [t.name, t.yaxis || 'y'])")
    assert all("{" not in name for name, _ in overlay)
    assert [axis for name, axis in overlay if name.startswith("KV cache used")] == ["y2"]
    assert dict(overlay)["requests running (num_requests_running)"] == "y"
    page.screenshot(path=str(screenshot_dir / "report.png"), full_page=True)
    print(f"screenshot: {screenshot_dir / 'report.png'}")
    assert " ".join(page.inner_text(".banner").split()).startswith("PASS surgelab run exit 0 · stop: completed")
    assert page.inner_text("#failures-none") == "No request failed."
    narrow(page)


def test_report_command_rebuilds_and_show_prints(run_dir, tmp_path, surgelab_cli):
    (run_dir / "report.html").unlink()
    result = surgelab_cli("report", str(run_dir), "--json", str(tmp_path / "report.json"))
    assert result.returncode == 0, result.stderr
    assert (run_dir / "report.html").exists()
    assert json.loads((tmp_path / "report.json").read_text())["version"] == REPORT_VERSION
    shown = surgelab_cli("show", str(run_dir))
    assert shown.returncode == 0, shown.stderr
    assert "report-test · open loop" in shown.stdout and "TTFT" in shown.stdout and "throughput (ok/s)" in shown.stdout
    missing = surgelab_cli("show", str(tmp_path))
    assert missing.returncode == 2 and "not a run directory" in missing.stderr


def test_sweep_directory_report_has_the_curve_knee_and_slo(tiny_server, tmp_path, surgelab_cli, scenario_maker, browser, narrow):
    """The sweep page: a per-level table with counts, sparse P99s greyed and said, a TPOT curve under the
    TPOT SLO line, the knee in the curve's unit, and the capacity as a table rather than raw JSON."""
    scenario = scenario_maker(tmp_path / "sweep.yaml", tiny_server.base_url, mix=False)
    text = scenario.read_text() + "slo: {ttft: 250ms, tpot: 50ms}\n"
    scenario.write_text(text)
    out = tmp_path / "sweep"
    result = surgelab_cli("sweep", str(scenario), "--out", str(out), "--mode", "rate", "--levels", "5,10,20",
                          "--hold", "1s", "--settle", "0.2s", "--warmup", "0")  # fmt: skip
    assert result.returncode in (0, 1), result.stdout + result.stderr
    data = build_report_data(out)
    sweep = data.extensions["sweep"]
    assert data.kind == "sweep" and len(sweep["points"]) == 3
    assert sweep["slo_ms"] == {"ttft": 250.0, "tpot": 50.0}
    # 1 s levels hold tens of requests: every P99 is sparse, and the sweep says so
    assert all(p["sparse"] and p["measured"] < 500 for p in sweep["points"])
    report = surgelab_cli("report", str(out))
    assert report.returncode == 0, report.stderr
    console = Console(width=80, file=StringIO(), color_system=None)  # the sweep's own table, at 80 columns
    print_sweep(read_sweep(out / "sweep.json"), console)
    lines = console.file.getvalue().splitlines()
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("stop:"))]
    assert max(map(len, table)) <= 80 and sum(1 for line in table if line.strip()[:2] in ("5 ", "10", "20")) == 3
    said = " ".join(" ".join(lines).split())
    assert "P99 TTFT of 3 level(s) with fewer than 500 requests left out" in said  # out of the latency knee
    if sweep["plan"] is not None:
        assert "rests on a sparse tail: P99 of" in said
    shown = surgelab_cli("show", str(out))
    assert shown.returncode == 0 and "TTFT p99" in shown.stdout, shown.stdout + shown.stderr
    page = browser(offline=True).new_page()
    page.goto((out / "report.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    charts = page.evaluate("window.SURGELAB_CHARTS")
    # each latency on its own axis: TPOT (a few ms) once shared E2E's axis and sat on the floor
    assert charts["chart-sweep"]["traces"] == ["TTFT p99 (sparse: n < 500)"]
    assert charts["chart-sweep-e2e"]["traces"] == ["E2E p99 (sparse: n < 500)"]
    assert charts["chart-sweep-decode"]["traces"] == ["ITL p99 (sparse: n < 500)", "TPOT p99 (sparse: n < 500)"]
    assert charts["chart-sweep"]["points"] == [3]
    shapes = lambda chart: page.evaluate(f"document.getElementById('{chart}').layout.shapes.map(s => s.y0)")  # noqa: E731
    assert 250.0 in shapes("chart-sweep") and 50.0 in shapes("chart-sweep-decode")  # the SLO lines, each with its curve
    decode_top = page.evaluate("document.getElementById('chart-sweep-decode')._fullLayout.yaxis.range[1]")
    own = max(v for p in sweep["points"] for v in (p["itl_p99_ms"], p["tpot_p99_ms"], 50.0) if v is not None)
    e2e = max(p["e2e_p99_ms"] for p in sweep["points"])
    assert own <= decode_top <= 1.3 * own and (e2e <= own or decode_top < e2e), (decode_top, own, e2e)
    load = page.evaluate("Object.fromEntries(document.getElementById('chart-sweep-load').data.map(t => [t.name, t.y]))")
    assert "ideal (achieved = offered)" in load and load["goodput (within every SLO)"] == [p["goodput"] for p in sweep["points"]]
    rows = page.evaluate("Array.from(document.querySelectorAll('#levels-table tr')).slice(1).map(r => "
                         "({cells: Array.from(r.cells).map(c => c.innerText), grey: getComputedStyle(r).color,"
                         " marked: Array.from(r.cells).map(c => !!c.querySelector('.sparse-cell')),"
                         " link: (r.querySelector('a') || {}).href}))")  # fmt: skip
    head = page.evaluate("Array.from(document.querySelectorAll('#levels-table th')).map(c => c.innerText)")
    col = {name: i for i, name in enumerate(head)}
    assert [r["cells"][col["n"]] for r in rows] == [f"{p['measured']:,}" for p in sweep["points"]]  # n beside every level
    # sparse P99 cells marked, not the whole table greyed: counts, rates and medians read as they are
    assert len({r["grey"] for r in rows}) == 1 and rows[0]["grey"] == page.evaluate("getComputedStyle(document.querySelector('#levels-table th')).color")
    for r in rows:
        assert [head[i] for i, m in enumerate(r["marked"]) if m] == ["TTFT p99", "E2E p99", "ITL p99", "TPOT p99"]
        assert r["cells"][col["TTFT p99"]].endswith("*") and not r["cells"][col["TTFT p50"]].endswith("*")
    assert [r["cells"][col["goodput"]] for r in rows] == [page.evaluate(f"slFmt({p['goodput']})") for p in sweep["points"]]
    # each level's own report, a click away
    assert [r["link"].rsplit("/", 2)[-2:] for r in rows] == [[p["run_dir"], "report.html"] for p in sweep["points"]]
    assert all((out / p["run_dir"] / "report.html").exists() for p in sweep["points"])
    capacity = sweep["plan"]
    if capacity is not None:
        table = page.inner_text("#capacity-table")
        assert "{" not in table and "sparse tail" in table
        assert "sparse tail" in page.inner_text("#card-capacity")
    if sweep["knee"] is not None:  # the card in the unit of the knee line on the curve
        line = page.evaluate("document.getElementById('chart-sweep').layout.shapes.filter(s => s.yref === 'paper')[0].x0")
        assert page.inner_text("#card-knee .value").startswith(f"{line:.1f}".rstrip("0").rstrip("."))
    banner = " ".join(page.inner_text(".banner").split())  # the sweep's verdict: its capacity, or that no level met the SLO
    if capacity is not None:
        assert banner.startswith(("PASS surgelab sweep exit 0", "INVALID surgelab sweep exit 0")) and "SLA capacity" in banner
    else:
        assert banner.startswith("FAIL surgelab sweep exit 0") and "first failing bound: no level met P99 TTFT ≤ 250 ms" in banner
    narrow(page)
    page.goto(rows[0]["link"])  # the link opens the level's own page
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    assert page.inner_text("#card-requests .value") == f"{sweep['points'][0]['measured']:,}"


def test_simulation_report_is_charted_over_simulated_time_with_its_slo(tmp_path, surgelab_cli, browser, screenshot_dir, narrow):
    """A simulation's wall time is the simulator's CPU time: charts once covered 0–0.1 s of a 30 s run,
    the TTFT P99 card disagreed with every chart, the SLO and its misses were nowhere, and the header
    showed a URL nobody contacted."""
    (tmp_path / "s.yaml").write_text(
        "name: sim\ntarget: {url: 'http://127.0.0.1:9/v1', model: m}\n"
        "load: {rate: {type: ramp, start: 2, end: 40, over: 30s}, duration: 30s}\n"
        "workload: {prompt_tokens: 100, output_tokens: 32}\nslo: {e2e: 1s}\n"
    )
    (tmp_path / "f.yaml").write_text("name: one\npools: [{profile: llama2-7b-a10, cost_per_hour: 2.0}]\n")
    out = tmp_path / "sim"
    result = surgelab_cli("simulate", str(tmp_path / "s.yaml"), "--fleet", str(tmp_path / "f.yaml"), "--out", str(out))
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    run_info = json.loads((out / "run.json").read_text())
    fleet_json = json.loads((out / "fleet.json").read_text())
    assert run_info["wall_s"] < 5 < run_info["simulated_end_s"]  # the trap: wall time is not the run's span
    data = build_report_data(out)
    fleet = data.extensions["fleet"]
    assert len(fleet["t"]) >= 10 and max(fleet["replicas"]) >= 1 and max(fleet["cost_per_hour"]) >= 2.0
    assert data.slo["misses"] == fleet_json["sla_violations"] > 0  # the same count as the simulator's
    page = browser(offline=True).new_page()
    page.goto((out / "report.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    charts = page.evaluate("window.SURGELAB_CHARTS")
    assert charts["chart-fleet"]["traces"] == ["provisioned", "ready"]
    assert charts["chart-fleet-requests"]["traces"] == ["waiting inside replicas", "held by replicas (waiting + running)", "router queue", "shed per interval"]
    assert all(p == len(fleet["t"]) for p in charts["chart-fleet"]["points"] + charts["chart-fleet-requests"]["points"])
    assert charts["chart-fleet-cost"]["points"] == [len(fleet["t"])]
    for chart in ("chart-load", "chart-ttft-time", "chart-e2e-time", "chart-errors", "chart-lag"):
        low, high = page.evaluate(f"document.getElementById('{chart}')._fullLayout.xaxis.range")
        assert low <= 1 and abs(high - run_info["simulated_end_s"]) <= 1.5, (chart, low, high)
    # the card is summary.json's figure, and the per-second P99 curve reaches it (a P99 over all requests
    # cannot exceed every window's P99)
    p99 = summary["latency_ms"]["ttft"]["p99"]
    assert page.inner_text("#card-ttft_p99 .value").replace("ms", "").replace(",", "") == f"{p99:.0f}"
    peak = page.evaluate("Math.max(...document.getElementById('chart-ttft-time').data.filter(t => t.name.startsWith('p99'))"
                         ".flatMap(t => t.y.filter(v => v !== null)))")  # the P99 traces, firm and sparse
    assert peak >= 0.9 * p99
    # the SLO: a line on the E2E chart, its misses on the page and per second
    assert 1000.0 in page.evaluate("document.getElementById('chart-e2e-time').layout.shapes.map(s => s.y0)")
    missed = fleet_json["sla_violations"]
    assert f"{missed:,} of {summary['requests']['measured']:,} measured requests missed it" in page.inner_text("#slo-line")
    assert sum(page.evaluate("document.getElementById('chart-slo').data[0].y")) == missed
    header = page.inner_text("header")
    assert "SIMULATED" in header and "127.0.0.1:9" not in header
    assert "none" in page.get_attribute("#card-thresholds", "class").split()  # not green: nothing was checked
    banner = " ".join(page.inner_text(".banner").split())  # judged like a run; `surgelab simulate` itself exits 0
    assert banner.startswith("PASS surgelab simulate exit 0 · stop: completed"), banner
    assert f"missed by {missed:,} of {summary['requests']['measured']:,} measured requests: an objective, not a threshold" in banner
    page.screenshot(path=str(screenshot_dir / "simulation.png"), full_page=True)
    narrow(page)


def test_prompts_longer_than_asked_are_said_on_the_page_and_in_the_terminal(tmp_path, surgelab_cli, browser):
    """A server that counts more tokens than surgelab meant (its BPE and chat template, no /tokenize)."""
    pytest.importorskip("tokenizers")
    from surgelab.process import ListeningChild

    cmd = [sys.executable, "-m", "surgelab.testing.tokenizing_server", "--port", "0", "--dialect", "none"]
    with ListeningChild(cmd, label="the tokenizing server", startup_timeout=30) as server:
        out = tmp_path / "run"
        done = surgelab_cli("run", "--url", server.root_url + "/v1", "--model", "m", "--rate", "10", "--duration",
                            "1s", "--prompt-tokens", "64", "--max-tokens", "4", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    [warning] = summary["warnings"]
    assert warning.startswith("prompts arrived") and summary["prompt_lengths"]["ratio"] > 1.5
    assert "warning: prompts arrived" in " ".join(done.stdout.split())
    page = browser(offline=True).new_page()
    page.goto((out / "report.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    shown = page.inner_text("p.warn")
    assert shown == "Warning: " + warning and page.is_visible("p.warn")


def test_plan_writes_a_page_with_the_fleet_curve_and_artefacts(tmp_path, surgelab_cli, browser, narrow):
    """``surgelab plan --out`` wrote plan.json, hpa.yaml and alerts.yaml but no page to read them on."""
    out = tmp_path / "plan"
    done = surgelab_cli("plan", "--capacity", "31", "--peak", "200", "--spares", "1", "--gpu-hour-cost", "2.5",
                        "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    plan = json.loads((out / "plan.json").read_text())
    page = browser(offline=True).new_page()
    page.goto((out / "plan.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    assert page.inner_text("#card-instances .value") == str(plan["fleet"]["total"]) == "11"
    assert page.inner_text("#card-instances .label") == "Instances (N+1)"
    charts = page.evaluate("window.SURGELAB_CHARTS")
    rows = len(plan["fleet"]["table"])
    assert charts["chart-plan-curve"]["traces"] == ["cost per month", "P(SLA holds)", "P(SLA holds, one instance down)"]
    assert charts["chart-plan-curve"]["points"] == [rows] * 3
    assert "planned" in page.inner_text("#plan-table") and plan["fleet"]["arithmetic"][0] in page.inner_text("#arithmetic")
    assert (out / "hpa.yaml").read_text().strip() in page.inner_text("main")
    banner = " ".join(page.inner_text(".banner").split())
    assert banner.startswith("PASS surgelab plan exit 0") and "11 instances for a peak of 200 req/s" in banner
    narrow(page)


def test_search_page_shows_the_winner_the_front_and_every_configuration(tmp_path, surgelab_cli, browser):
    """``plan --search --out``: the winner's card equals search.json, the front is charted point for point,
    every configuration is a row of the table, and the table sorts."""
    scenario = {"name": "chat", "seed": 3, "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
                "load": {"rate": 10, "duration": "15s", "warmup": "3s"},
                "workload": {"prompt_tokens": 400, "output_tokens": 150}}  # fmt: skip
    space = {"name": "page", "workload": "chat.yaml", "peak": 20, "slo": ["p99(ttft) < 500ms", "p99(e2e) < 5s"],
             "model": "qwen2.5-7b", "gpus": {"h100": 2.49, "l40s": 0.99, "a100": 1.79}, "weights": ["bf16", "fp8"],
             "replicas": {"min": 1, "max": 8}, "seeds": 1}  # fmt: skip
    data, page = _searched_page(tmp_path, {"chat.yaml": scenario}, space, surgelab_cli, browser)
    winner = data["winner"]
    assert page.inner_text("#card-winner .value") == winner["candidate"]["label"]
    assert page.inner_text("#card-replicas .value") == str(winner["robust_replicas"])
    charts = page.evaluate("window.SURGELAB_CHARTS")["chart-front"]
    passing = [o for o in data["outcomes"] if o["status"] == "passed"]
    assert charts["traces"][:2] == ["passing", "Pareto front"] and charts["traces"][-1] == "chosen"
    assert charts["points"][0] + charts["points"][1] == len(passing) and charts["points"][1] == len(data["front"])
    rows = page.locator("#search-table tr")
    assert rows.count() == len(data["outcomes"]) + 1
    page.locator("#search-table th", has_text="cost/h").click()
    first = page.locator("#search-table tr").nth(1).inner_text()
    cheapest = min(o["cost_per_hour"] for o in data["outcomes"] if o["cost_per_hour"] is not None)
    assert f"{cheapest:.2f}" in first.replace(",", "")
    assert "pools:" in page.inner_text("#fleet-file") and page.inner_text("#objective").startswith("Objective: p99(ttft) < 500ms")


def _searched_page(tmp_path, files: dict, space: dict, surgelab_cli, browser):
    """``plan --search`` on ``space`` (its workload among ``files``), then its page opened offline: (search.json, page)."""
    for name, data in files.items():
        (tmp_path / name).write_text(yaml.safe_dump(data))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    out = tmp_path / "out"
    done = surgelab_cli("plan", "--search", str(tmp_path / "space.yaml"), "--workers", "1", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    page = browser(offline=True).new_page()
    page.goto((out / "search.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    return json.loads((out / "search.json").read_text()), page


def test_an_autoscaled_search_page_shows_the_hpa_and_its_mean(tmp_path, surgelab_cli, browser):
    """An HPA winner: its card says the HPA's range and the mean replicas paid for, as search.json does,
    and its row in the table says so too (not a fixed count)."""
    scenario = {"name": "spike", "seed": 3, "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
                "load": {"rate": {"type": "spike", "base": 4, "peak": 40, "at": "40s", "rise": "10s", "hold": "40s",
                                  "decay": "10s", "after": "40s"}, "warmup": "10s"},
                "workload": {"system_prompt_tokens": 100, "prompt_tokens": {"dist": "lognormal", "mean": 500, "std": 200, "max": 2000},
                             "output_tokens": {"dist": "uniform", "min": 100, "max": 300}}}  # fmt: skip
    space = {"name": "hpa-page", "workload": "spike.yaml", "slo": ["p99(ttft) < 500ms", "p99(e2e) < 6s"],
             "model": "qwen2.5-7b", "gpus": {"h100": 2.49}, "max_num_seqs": 128, "max_num_batched_tokens": 2048, "seeds": 0,
             "autoscale": {"metric": "rps", "target": 20, "max": 8, "cold_start": "15s",
                           "settings": {"sync_period": "5s", "scale_down": {"stabilization": "20s"}}}}  # fmt: skip
    data, page = _searched_page(tmp_path, {"spike.yaml": scenario}, space, surgelab_cli, browser)
    winner = data["winner"]
    assert winner["candidate"]["autoscale"] is not None, "on this spike the HPA costs less than the peak's fixed fleet"
    card = page.inner_text("#card-replicas .value")
    assert card == winner["replicas_text"] and card.startswith("HPA 1–8, mean ")
    assert f"{winner['mean_replicas']:.1f}" in card
    row = next(r for r in page.locator("#search-table tr").all_inner_texts() if r.startswith(winner["candidate"]["label"]))
    assert card in row and winner["replicas_text"] in page.inner_text("header")
    assert "autoscale:" in page.inner_text("#fleet-file")
