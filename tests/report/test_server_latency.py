"""The run report sets the engine's own TTFT and E2E histograms beside the client's measurements
(issue 30: "server TTFT histograms and token counters scraped but never drawn")."""

from __future__ import annotations

import re

import pytest

from surgelab.report.model import build_report_data, load_columns


@pytest.fixture(scope="module")
def scraped_run(h100_server, tmp_path_factory, run_maker):
    tmp = tmp_path_factory.mktemp("server-latency")
    return run_maker(tmp, h100_server, "run", "--scrape", h100_server.root_url + "/metrics", mix=False, output_tokens=16)


def test_the_servers_buckets_and_the_clients_in_the_same_buckets(scraped_run):
    data = build_report_data(scraped_run)
    ttft = data.server_latency["ttft"]
    assert (ttft["engine"], ttft["metric"]) == ("vllm", "vllm:time_to_first_token_seconds")
    ok = int(load_columns(scraped_run).ok().sum())
    assert ttft["client_total"] == ok == sum(ttft["client"])  # every ok answer, warm-up included, in a bucket
    assert sum(ttft["server"]) == ttft["server_total"]
    # the scraper's last scrape comes after the last answer, so the server counted every request the client
    # did (without it, the answers after the last periodic scrape were missing: 68 of 71)
    assert ttft["server_total"] == ok and ttft["note"] == ""
    # the client's clock starts earlier (intended send time, HTTP, front end): never ahead of the server's
    assert ttft["client_bucketed_ms"]["p50"] >= ttft["server_ms"]["p50"]
    # and its exact P50 falls in the bucket the bucketed one does
    assert abs(ttft["client_ms"]["p50"] - ttft["client_bucketed_ms"]["p50"]) <= ttft["client_bucketed_ms"]["p50"]
    assert data.server_latency["e2e"]["metric"] == "vllm:e2e_request_latency_seconds"


def test_the_page_draws_both_and_says_what_the_server_measured(scraped_run, browser):
    page = browser(offline=True).new_page()
    page.goto((scraped_run / "report.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    model = page.evaluate("window.SURGELAB_REPORT")["server_latency"]["ttft"]
    chart = page.evaluate("window.SURGELAB_CHARTS['chart-server-ttft']")
    assert chart["points"] == [len(model["buckets"])] * 2
    assert chart["traces"] == [f"server ({model['server_total']:,})", f"client ({model['client_total']:,})"]
    note = page.inner_text("#server-ttft-note")
    # the page's figures are the model's, to the one decimal it prints (rounded by the page, half-up or even)
    quoted = re.search(r"server P50 ([\d.]+) ms.*in the same buckets: P50 ([\d.]+) ms", note)
    assert quoted is not None and "vllm:time_to_first_token_seconds: server P50" in note
    assert float(quoted[1]) == pytest.approx(model["server_ms"]["p50"], abs=0.051)
    assert float(quoted[2]) == pytest.approx(model["client_bucketed_ms"]["p50"], abs=0.051)
    plotted = page.evaluate("document.getElementById('chart-server-ttft').data.map(t => Array.from(t.y))")
    assert plotted == [model["server"], model["client"]]
    assert "Client exact: P50" in note
