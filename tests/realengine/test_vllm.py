"""surgelab against vLLM's real OpenAI-compatible server (CPU build, a tiny random Llama model).

Skipped unless ``SURGELAB_VLLM_URL`` names a running server (its root, without ``/v1``)::

    ci/vllm/setup.sh && ci/vllm/start.sh 8100
    SURGELAB_VLLM_URL=http://127.0.0.1:8100 pytest tests/realengine -q -s
    ci/vllm/stop.sh 8100

``SURGELAB_VLLM_MODEL`` is the served model name ("tiny"). Every check reads vLLM's own
``/metrics`` before and after a surgelab command and holds surgelab's records against it:
token totals exactly, client TTFT beside the server's TTFT histogram (the difference is
printed; ``-s`` shows it). The tests run one after another against one server, which nothing
else loads meanwhile. Rates are low: vLLM's engine busy-polls most of a core, and on two
cores the load generator shares what is left.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from surgelab.metrics.store import read_records
from surgelab.plan.k8s import capacity_alert_rules
from surgelab.telemetry.alerts import slo_alert_rules
from surgelab.telemetry.derive import histogram_quantile
from surgelab.telemetry.presets import PRESETS
from surgelab.telemetry.samples import parse_exposition

URL = os.environ.get("SURGELAB_VLLM_URL", "").rstrip("/")
MODEL = os.environ.get("SURGELAB_VLLM_MODEL", "tiny")
PROMPT_TOKENS = 128
OUTPUT_TOKENS = 32
TTFT = "vllm:time_to_first_token_seconds"
EPS_S = 0.001  # clock slack between the client's monotonic clock and vLLM's timestamps
# Client TTFT minus vLLM's: HTTP, JSON, chat template and tokenising before vLLM's clock starts,
# detokenising and the SSE write after it stops. The median difference is a few ms; the mean's
# carries the tail of CPU scheduling on a 2-core machine that vLLM's engine keeps busy (the same
# with a bare socket client), so the bounds are: median within 50 ms, mean within 250 ms.
MAX_TTFT_GAP_MEDIAN_S = 0.050
MAX_TTFT_GAP_MEAN_S = 0.250
# Those two bounds hold only when vLLM and the client have the machine to themselves (as in CI):
# when unrelated processes kept more than this many cores busy during a run, they are not asserted.
OTHER_WORK_LIMIT_CORES = 0.3

pytestmark = [
    pytest.mark.skipif(not URL, reason="SURGELAB_VLLM_URL is not set (a running vLLM server, e.g. ci/vllm/start.sh)"),
    pytest.mark.timeout(300),
]


# ---------------------------------------------------------------- vLLM's /metrics


@dataclass(frozen=True)
class Metrics:
    """One scrape of vLLM's /metrics: families by name, samples by sample name."""

    families: dict[str, str]  # family name -> type
    samples: dict[str, list[tuple[dict[str, str], float]]]

    def total(self, name: str) -> float:
        """Sum of a sample over this model's label sets (``vllm:generation_tokens_total``)."""
        return sum(v for labels, v in self.samples.get(name, []) if labels.get("model_name", MODEL) == MODEL)

    def buckets(self, name: str) -> dict[float, float]:
        """A histogram's cumulative bucket counts by upper bound, summed over this model's label sets."""
        out: dict[float, float] = {}
        for labels, v in self.samples.get(f"{name}_bucket", []):
            if labels.get("model_name", MODEL) == MODEL:
                le = float(labels["le"])
                out[le] = out.get(le, 0.0) + v
        return out


def scrape() -> Metrics:
    with urllib.request.urlopen(f"{URL}/metrics", timeout=10) as resp:
        families = parse_exposition(resp.read().decode())
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in families:
        for name, labels, value in family.samples:
            samples.setdefault(name, []).append((labels, value))
    return Metrics({f.name: f.kind for f in families}, samples)


@dataclass(frozen=True)
class ServerDelta:
    """What vLLM counted between two scrapes."""

    prompt_tokens: float
    generation_tokens: float
    ttft_count: float
    ttft_sum: float
    ttft_buckets: dict[float, float]  # cumulative, by upper bound

    @classmethod
    def between(cls, before: Metrics, after: Metrics) -> ServerDelta:
        b0, b1 = before.buckets(TTFT), after.buckets(TTFT)
        return cls(
            prompt_tokens=after.total("vllm:prompt_tokens_total") - before.total("vllm:prompt_tokens_total"),
            generation_tokens=after.total("vllm:generation_tokens_total")
            - before.total("vllm:generation_tokens_total"),
            ttft_count=after.total(f"{TTFT}_count") - before.total(f"{TTFT}_count"),
            ttft_sum=after.total(f"{TTFT}_sum") - before.total(f"{TTFT}_sum"),
            ttft_buckets={le: b1[le] - b0.get(le, 0.0) for le in sorted(b1)},
        )

    def ttft_quantile(self, q: float) -> float | None:
        bounds = np.array(list(self.ttft_buckets), dtype=float)
        return histogram_quantile(q, bounds, np.array(list(self.ttft_buckets.values()), dtype=float))


@dataclass(frozen=True)
class Cpu:
    """CPU seconds so far: the whole machine's busy time, vLLM's processes', this test's and its children's."""

    at: float
    machine: float
    vllm: float
    ours: float

    @classmethod
    def now(cls) -> Cpu:
        tick = os.sysconf("SC_CLK_TCK")
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / tick  # all but idle and iowait
        vllm = 0.0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"vllm" not in f.read().lower():
                        continue
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
                vllm += (int(stat[11]) + int(stat[12])) / tick  # utime, stime
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
        t = os.times()
        return cls(time.monotonic(), busy, vllm, t.user + t.system + t.children_user + t.children_system)

    def other_cores(self, before: Cpu) -> float:
        """Cores kept busy by anything but vLLM, this test and the surgelab commands it ran."""
        spent = (self.machine - before.machine) - (self.vllm - before.vllm) - (self.ours - before.ours)
        return max(spent, 0.0) / max(self.at - before.at, 1e-9)


def wait_idle(timeout_s: float = 30.0) -> None:
    """Until vLLM runs and queues nothing (a previous command's requests have all finished)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = scrape()
        if m.total("vllm:num_requests_running") == 0 and m.total("vllm:num_requests_waiting") == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"vLLM still busy after {timeout_s:g} s")


# ---------------------------------------------------------------- surgelab commands


@dataclass
class Measured:
    run_dir: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    server: ServerDelta
    before: Metrics
    after: Metrics
    other_cores: float  # cores other processes kept busy during the run


def scenario(path: Path, load: dict[str, Any], preset: str | None = None, kind: str | None = None) -> Path:
    """A scenario file for vLLM; with ``preset``, its /metrics scraped every second; ``kind``: the request kind
    (responses, messages; default the chat endpoint)."""
    data = {
        "name": "vllm-real",
        "seed": 17,
        "target": {
            "url": f"{URL}/v1",
            "model": MODEL,
            "endpoint": "chat",
            "stream": True,
            "timeouts": {"connect": "5s", "first_token": "30s", "total": "60s"},
        },
        "load": load,
        "workload": {
            "prompt_tokens": PROMPT_TOKENS,
            "output_tokens": OUTPUT_TOKENS,
            **({"kind": kind} if kind else {}),
        },
        # vLLM's counters are compared with the records exactly: the pre-flight's one request (one output
        # token, not a record of the run) would be counted by vLLM alone
        "preflight": False,
    }
    if preset is not None:
        data["telemetry"] = {"interval": "1s", "sources": [{"url": f"{URL}/metrics", "preset": preset}]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def accept_exit(returncode: int, summary: dict[str, Any], output: str) -> None:
    """Exit 0; or 3 when the only reason is the client's schedule lag on this shared 2-core machine."""
    if returncode == 0:
        return
    reasons = summary.get("validity", {}).get("reasons", [])
    lag_only = returncode == 3 and reasons and all(r.startswith("client fell behind its schedule") for r in reasons)
    assert lag_only, f"surgelab exited {returncode}: {reasons}\n{output[-3000:]}"
    print(f"  note: run marked invalid by the client's own lag ({'; '.join(reasons)}); vLLM's engine shares 2 cores")


def measured_run(cli: Callable[..., Any], reconciled: Callable[..., Any], run_dir: Path, *args: str) -> Measured:
    wait_idle()
    before = scrape()
    cpu = Cpu.now()
    result = cli("run", *args, "--out", str(run_dir), "-q", timeout=180)
    other_cores = Cpu.now().other_cores(cpu)
    wait_idle()
    after = scrape()
    summary_path = run_dir / "summary.json"
    assert summary_path.is_file(), (
        f"no summary (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    summary = json.loads(summary_path.read_text())
    accept_exit(result.returncode, summary, result.stdout + result.stderr)
    records = reconciled(summary, run_dir).to_pylist()
    return Measured(run_dir, summary, records, ServerDelta.between(before, after), before, after, other_cores)


def check_every_request_and_token(m: Measured, label: str, exact: bool = True) -> None:
    """Every request ok with the server's usage, and its token totals equal to vLLM's counters; ``exact``: every
    output exactly max_tokens (ignore_eos; vLLM's Messages API has no such field, so random weights may stop early)."""
    states = {}
    for r in m.records:
        states[r["state"]] = states.get(r["state"], 0) + 1
    assert m.records, "no request was sent"
    assert states == {"ok": len(m.records)}, (
        f"{label}: states {states}; first error {next((r['error'] for r in m.records if r['error']), None)}"
    )
    assert {r["usage_source"] for r in m.records} == {"server"}
    if exact:
        assert all(r["output_tokens"] == OUTPUT_TOKENS for r in m.records), (
            "ignore_eos: every output exactly max_tokens"
        )
    prompt = sum(r["prompt_tokens"] for r in m.records)
    output = sum(r["output_tokens"] for r in m.records)
    print(
        f"\n{label}: {len(m.records)} requests ok; output tokens {output} (vLLM {m.server.generation_tokens:.0f}), "
        f"prompt tokens {prompt} (vLLM {m.server.prompt_tokens:.0f}; {prompt / len(m.records):.0f} per request "
        f"at vLLM for --prompt-tokens {PROMPT_TOKENS})"
    )
    assert output == m.server.generation_tokens, "surgelab's output tokens == Δ vllm:generation_tokens_total"
    assert prompt == m.server.prompt_tokens, "surgelab's prompt tokens == Δ vllm:prompt_tokens_total"


def check_ttft(m: Measured, label: str, bounds: bool = True) -> dict[str, float]:
    """Client TTFT (first content chunk − send) beside vLLM's own TTFT histogram over the same requests."""
    client = np.array([(r["first_token_ns"] - r["sent_ns"]) / 1e9 for r in m.records])
    s = m.server
    assert s.ttft_count == len(client), f"vLLM observed {s.ttft_count:.0f} first tokens for {len(client)} requests"
    server_mean = s.ttft_sum / s.ttft_count
    figures = {
        "client_mean_ms": client.mean() * 1e3,
        "server_mean_ms": server_mean * 1e3,
        "gap_mean_ms": (client.mean() - server_mean) * 1e3,
        "client_p50_ms": float(np.percentile(client, 50)) * 1e3,
        "server_p50_ms": (s.ttft_quantile(0.5) or float("nan")) * 1e3,
        "client_p90_ms": float(np.percentile(client, 90)) * 1e3,
        "server_p90_ms": (s.ttft_quantile(0.9) or float("nan")) * 1e3,
    }
    print(
        f"{label} TTFT: client mean {figures['client_mean_ms']:.1f} ms, vLLM mean {figures['server_mean_ms']:.1f} ms "
        f"(_sum/_count), difference {figures['gap_mean_ms']:+.1f} ms; P50 client {figures['client_p50_ms']:.1f} ms / "
        f"vLLM {figures['server_p50_ms']:.1f} ms (buckets), P90 {figures['client_p90_ms']:.1f} / "
        f"{figures['server_p90_ms']:.1f} ms; other work on the machine {m.other_cores:.2f} cores"
    )
    # Each request's client TTFT contains its server TTFT, so the client's distribution lies to the
    # right of vLLM's at every bucket bound: no more client TTFTs below a bound than vLLM counted.
    for le, count in s.ttft_buckets.items():
        if np.isfinite(le):
            below = int((client <= le - EPS_S).sum())
            assert below <= count, (
                f"{below} client TTFTs <= {le - EPS_S:g}s but vLLM counted only {count:.0f} <= {le:g}s"
            )
    assert client.mean() >= server_mean - EPS_S, "client mean TTFT below vLLM's own"
    if not bounds:
        return figures
    if m.other_cores > OTHER_WORK_LIMIT_CORES:
        print(f"  note: other processes kept {m.other_cores:.2f} cores busy: the difference's bounds are not asserted")
        return figures
    gap_p50 = figures["client_p50_ms"] - figures["server_p50_ms"]
    assert gap_p50 < MAX_TTFT_GAP_MEDIAN_S * 1e3, f"client median TTFT exceeds vLLM's by {gap_p50:.1f} ms"
    assert figures["gap_mean_ms"] < MAX_TTFT_GAP_MEAN_S * 1e3, (
        f"client mean TTFT exceeds vLLM's by {figures['gap_mean_ms']:.1f} ms"
    )
    return figures


# ---------------------------------------------------------------- the checks


def test_probe_passes_what_real_vllm_offers(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Runs first, so the cold-start probe meets a server that served nothing yet (in CI)."""
    out = tmp_path / "probe.json"
    result = cli("probe", "--url", f"{URL}/v1", "--model", MODEL, "--out", str(out),
                 "--context-limit", "8192", "--context-budget", "90s", timeout=240)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    doc = json.loads(out.read_text())
    metrics = {k: v["value"] for k, v in doc["metrics"].items()}
    print("\nprobe:", {k: round(v, 3) if isinstance(v, float) else v for k, v in metrics.items()})
    assert metrics["openai_compat"] == 1.0, doc["metrics"]["openai_compat"]["found"]
    assert metrics["models_listed"] == 1.0, doc["metrics"]["models_listed"]["found"]
    assert metrics["output_control"] == 1.0, doc["metrics"]["output_control"]["found"]
    models = next(p for p in doc["probes"] if p["name"] == "models")
    max_len = models["details"]["declared_max_model_len"]
    assert isinstance(max_len, int) and max_len > 0, "vLLM declares max_model_len in /v1/models"
    # The longest accepted prompt as vLLM counted it: prompt + 1 output token must fit max_model_len.
    # surgelab steps in its own words, several of vLLM's tokens each, so it lands a little below.
    assert 0.98 * max_len <= metrics["max_context"] <= max_len - 1, doc["metrics"]["max_context"]["found"]
    assert metrics["cold_start"] is not None and metrics["cold_start"] >= -1.0
    assert metrics["multi_turn_retention"] == 0.0, "random weights never recall the code word"


@pytest.fixture(scope="module")
def open_loop(
    cli: Callable[..., Any], reconciled: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Measured:
    d = tmp_path_factory.mktemp("open")
    spec = scenario(d / "open.yaml", {"rate": 2, "arrival": "constant", "duration": "12s", "warmup": "0s"})
    return measured_run(cli, reconciled, d / "run", str(spec))


@pytest.fixture(scope="module")
def closed_loop(
    cli: Callable[..., Any], reconciled: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Measured:
    d = tmp_path_factory.mktemp("closed")
    return measured_run(
        cli, reconciled, d / "run",
        "--url", f"{URL}/v1", "--model", MODEL, "--concurrency", "2", "--duration", "12s",
        "--prompt-tokens", str(PROMPT_TOKENS), "--max-tokens", str(OUTPUT_TOKENS),
        "--no-preflight",  # counters compared exactly, as in scenario()
    )  # fmt: skip


@pytest.fixture(scope="module")
def scraped(
    cli: Callable[..., Any], reconciled: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Measured:
    """The closed loop again, shorter, with vLLM's /metrics scraped every second (preset: vllm)."""
    d = tmp_path_factory.mktemp("scraped")
    load = {"concurrency": 2, "duration": "8s", "warmup": "0s"}
    return measured_run(cli, reconciled, d / "run", str(scenario(d / "scraped.yaml", load, preset="vllm")))


def test_open_loop_tokens_equal_vllm_counters(open_loop: Measured) -> None:
    check_every_request_and_token(open_loop, "open loop 2 req/s for 12 s")
    assert len(open_loop.records) == 24, "a constant 2 req/s for 12 s schedules 24 requests"


def test_open_loop_ttft_beside_vllm_histogram(open_loop: Measured) -> None:
    check_ttft(open_loop, "open loop")


def test_closed_loop_tokens_equal_vllm_counters(closed_loop: Measured) -> None:
    check_every_request_and_token(closed_loop, "closed loop 2 users for 12 s")


def test_closed_loop_ttft_beside_vllm_histogram(closed_loop: Measured) -> None:
    check_ttft(closed_loop, "closed loop")


@pytest.fixture(scope="module")
def typed_runs(
    cli: Callable[..., Any], reconciled: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Measured]:
    """A streamed open loop of each of the newer APIs: OpenAI's Responses and Anthropic's Messages."""
    runs = {}
    for kind in ("responses", "messages"):
        d = tmp_path_factory.mktemp(kind)
        load = {"rate": 2, "arrival": "constant", "duration": "6s", "warmup": "0s"}
        runs[kind] = measured_run(cli, reconciled, d / "run", str(scenario(d / f"{kind}.yaml", load, kind=kind)))
    return runs


@pytest.mark.parametrize("kind", ["responses", "messages"])
def test_typed_streams_tokens_equal_vllm_counters(typed_runs: dict[str, Measured], kind: str) -> None:
    m = typed_runs[kind]
    assert {r["kind"] for r in m.records} == {kind}
    check_every_request_and_token(m, f"{kind} open loop 2 req/s for 6 s", exact=kind == "responses")
    assert len(m.records) == 12
    # a text delta per token, but for a byte-level token that ends inside a character: vLLM sends it with the next
    assert all(r["output_tokens"] // 2 <= len(r["itl_us"]) <= r["output_tokens"] - 1 for r in m.records)
    check_ttft(m, kind)


def _family_of(sample: str, families: set[str]) -> str:
    for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
        if sample.endswith(suffix) and sample[: -len(suffix)] in families:
            return sample[: -len(suffix)]
    return sample


def test_vllm_preset_names_real_metrics(scraped: Measured, closed_loop: Measured) -> None:
    """Every series the vllm preset expects is on the real server, and a run's scrape keeps them all."""
    check_every_request_and_token(scraped, "closed loop 2 users for 8 s, /metrics scraped every 1 s")
    preset = PRESETS["vllm"]
    exposed = set(scraped.after.families)
    missing = [s for s in preset.series if s not in exposed]
    assert not missing, f"the vllm preset names series vLLM does not expose: {missing}"
    for role, names in preset.roles.items():
        assert any(n in exposed for n in names.split("|")), f"role {role}: none of {names} exposed"
    table = pq.read_table(scraped.run_dir / "telemetry.parquet")
    kept = {_family_of(m, exposed) for m in set(table.column("metric").to_pylist())}
    assert not [s for s in preset.series if s not in kept], f"not scraped: {sorted(set(preset.series) - kept)}"
    assert not [s for s in kept if s.startswith("vllm:") and s not in preset.kept]
    telemetry = scraped.summary["telemetry"]
    (source,) = telemetry["sources"].values()
    assert source["preset"] == "vllm" and source["failed"] == 0, source
    assert set(telemetry["roles"]) >= {"running", "waiting", "kv_usage"}, telemetry["roles"]
    running = telemetry["roles"]["running"]
    print(f"vllm preset: {len(preset.series)} series all exposed and scraped; running {running}")
    assert running["max"] >= 1, "2 users: the running gauge saw them"
    # What scraping costs: vLLM renders /metrics on its front end's event loop, which also streams.
    with_scrape = check_ttft(scraped, "closed loop, /metrics scraped every 1 s", bounds=False)
    without = check_ttft(closed_loop, "closed loop, not scraped", bounds=False)
    print(
        f"scraping /metrics every 1 s moved the TTFT difference by {with_scrape['gap_mean_ms'] - without['gap_mean_ms']:+.1f} ms"
    )


def test_report_draws_vllms_own_ttft_histogram_beside_the_clients(scraped: Measured) -> None:
    """The run report's server histograms (report/server_latency.py) are real vLLM's: bucket for bucket what its
    /metrics counted over the run, and the client's TTFT sits at or right of it."""
    from surgelab.report.model import build_report_data

    ttft = build_report_data(scraped.run_dir).server_latency["ttft"]
    assert (ttft["engine"], ttft["metric"]) == ("vllm", TTFT)
    ok = sum(1 for r in scraped.records if r["state"] == "ok")
    assert ttft["client_total"] == ok
    # the run's last scrape comes after its last answer: vLLM's count of the run's requests, every one
    # (before the scraper's final scrape: 60 of 66, the answers after the last periodic scrape missing)
    assert ttft["server_total"] == scraped.server.ttft_count == ok
    assert ttft["client_bucketed_ms"]["p50"] >= ttft["server_ms"]["p50"]
    print(f"report: vLLM TTFT P50 {ttft['server_ms']['p50']} ms over {ttft['server_total']} requests; client "
          f"{ttft['client_bucketed_ms']['p50']} ms in the same buckets, {ttft['client_ms']['p50']} ms exact")  # fmt: skip


def test_alert_rules_name_real_metrics(scraped: Measured) -> None:
    """The vLLM names surgelab writes into alert rules and the plan's rules exist on vLLM 0.32."""
    text = json.dumps([slo_alert_rules(server=PRESETS["vllm"], knee_rps=10, e2e_p99_s=5), capacity_alert_rules(1.0, 2.0, ttft_slo_s=0.5)])
    used = set(re.findall(r"vllm:[a-z0-9_]+", text))
    samples = set(scraped.after.samples)
    assert used and not used - samples, f"not exposed by vLLM: {sorted(used - samples)}"


def test_short_sweep_completes(cli: Callable[..., Any], tmp_path: Path) -> None:
    spec = scenario(tmp_path / "sweep.yaml", {"concurrency": 1, "duration": "10s"}, preset="auto")
    out = tmp_path / "sweep"
    wait_idle()
    before = scrape()
    result = cli("sweep", str(spec), "--mode", "concurrency", "--levels", "1,2,4", "--hold", "3s",
                 "--settle", "1s", "--warmup", "0", "--out", str(out), "-q", timeout=180)  # fmt: skip
    wait_idle()
    delta = ServerDelta.between(before, scrape())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    sweep = json.loads((out / "sweep.json").read_text())
    levels = sweep["levels"]
    print(
        f"\nsweep: {[(lv['offered'], round(lv['requests_per_s'], 2), lv['error_rate']) for lv in levels]}; "
        f"stop: {sweep['stop_reason']}"
    )
    assert [lv["offered"] for lv in levels] == [1, 2, 4]
    assert all(lv["error_rate"] == 0 and lv["requests_per_s"] > 0 for lv in levels)
    for lv in levels:  # each level scraped vLLM's /metrics with preset auto: it recognised vLLM
        (source,) = json.loads((out / lv["run_dir"] / "summary.json").read_text())["telemetry"]["sources"].values()
        assert source["preset"] == "vllm" and source["failed"] == 0, source
    records = [r for lv in levels for r in read_records(out / lv["run_dir"]).to_pylist()]
    assert records and all(r["state"] == "ok" for r in records)
    assert sum(r["output_tokens"] for r in records) == delta.generation_tokens
    assert sum(r["prompt_tokens"] for r in records) == delta.prompt_tokens
