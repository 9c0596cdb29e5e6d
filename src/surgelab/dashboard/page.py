"""The dashboard page: a pipeline view, live curves and counters, polling ``/api/state`` every second.

Plotly comes from the dashboard itself (``/plotly.min.js``), never from a CDN. The page keeps
``window.SURGELAB_DASH`` (last sequence number, entries received, the latest entry, polls)
for tests and for anybody poking at it from the console. Its stop button carries the run's stop
token (``data-token``): a ``POST api/stop`` with it, after a confirmation, stops the run as Ctrl-C.
"""

from __future__ import annotations

from html import escape

from surgelab.report.html import page

__all__ = ["render_page"]

_CSS = """
<style>
.pipeline { background:#fff; border:1px solid var(--line); border-radius:8px; padding:8px; }
.pipeline svg { width:100%; height:auto; }
.node rect { fill:#eff6ff; stroke:#2563eb; stroke-width:1.5; rx:10; }
.node .name { font-weight:600; font-size:14px; } .node .big { font-size:22px; font-weight:700; fill:#0f172a; }
.node .small { font-size:12px; fill:#475569; } .edge { stroke:#64748b; stroke-width:2; marker-end:url(#arrow); }
.edge-label { font-size:12px; fill:#0f172a; font-weight:600; }
.flow { stroke:#2563eb; stroke-width:3; stroke-dasharray:4 10; animation: flow 1s linear infinite; }
@keyframes flow { to { stroke-dashoffset:-14; } }
#status { font-size:12px; color:#cbd5e1; }
.progress { background:#e2e8f0; border-radius:6px; height:14px; overflow:hidden; margin-top:10px; }
.progress .bar { background:#2563eb; height:100%; width:0; transition: width .5s; }
#progress-text { font-size:13px; color:#334155; margin-top:4px; }
#verdict { display:none; margin-top:12px; } #verdict.done { display:block; }
.card.bad { border-color:#fca5a5; background:#fef2f2; }
.controls { display:flex; gap:12px; align-items:center; margin-top:10px; flex-wrap:wrap; }
#stop-run { font:inherit; font-weight:600; color:#fff; background:#b91c1c; border:0; border-radius:6px; padding:6px 14px; cursor:pointer; }
#stop-run:disabled { background:#94a3b8; cursor:default; }
#stop-note { font-size:13px; color:#334155; }
</style>
"""

_BODY = """
<div id="status">connecting…</div>
<div id="verdict"></div>
<div class="progress"><div class="bar" id="progress-bar"></div></div><div id="progress-text">–</div>
<div class="controls"><button id="stop-run" type="button" disabled data-token="__STOP_TOKEN__">Stop the run</button>
<span id="stop-note">as Ctrl-C: requests in flight may finish within the grace, the report is written</span></div>
<h2>Pipeline</h2>
<div class="pipeline"><svg viewBox="0 0 1100 190" id="pipeline">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
<path d="M 0 0 L 10 5 L 0 10 z" fill="#64748b"/></marker></defs>
</svg></div>
<h2>Counters</h2><div class="cards" id="counters"></div>
<h2>Live curves</h2><div class="grid2" id="curves">
<div class="chart" id="live-throughput"></div><div class="chart" id="live-latency"></div>
<div class="chart" id="live-inflight"></div><div class="chart" id="live-errors"></div>
<div class="chart" id="live-decode"></div></div>
<div id="sweep"></div>
"""

_JS = r"""
(function () {
  const state = { seq: 0, entries: [], polls: 0, errors: 0, last: null, finished: false, points: [], bounds: {}, verdict: null };
  window.SURGELAB_DASH = state;
  const token = new URLSearchParams(location.search).get("token");
  const client = Math.random().toString(36).slice(2, 10);  // this page: the server waits for each page to see the end
  const q = (token ? "&token=" + encodeURIComponent(token) : "") + "&client=" + client;
  const svg = document.getElementById("pipeline");
  const NS = "http://www.w3.org/2000/svg";
  const nodes = [["arrivals", "Arrivals"], ["queue", "Client queue"], ["inflight", "In flight"], ["target", "Target"], ["responses", "Responses"]];
  const W = 170, GAP = 60, Y = 30, H = 120;
  function svgEl(tag, attrs, text) { const e = document.createElementNS(NS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; svg.appendChild(e); return e; }
  nodes.forEach(([id, name], i) => {
    const x = 10 + i * (W + GAP);
    const g = document.createElementNS(NS, "g"); g.setAttribute("class", "node"); g.id = "node-" + id; svg.appendChild(g);
    const r = document.createElementNS(NS, "rect"); Object.entries({ x: x, y: Y, width: W, height: H }).forEach(([k, v]) => r.setAttribute(k, v)); g.appendChild(r);
    [["name", name, 24], ["big", "–", 60], ["small", "", 84], ["small", "", 104]].forEach(([cls, txt, dy], j) => {
      const t = document.createElementNS(NS, "text"); t.setAttribute("x", x + W / 2); t.setAttribute("y", Y + dy); t.setAttribute("text-anchor", "middle");
      t.setAttribute("class", cls); t.id = "node-" + id + "-" + j; t.textContent = txt; g.appendChild(t); });
    if (i < nodes.length - 1) {
      const x1 = x + W, x2 = x + W + GAP;
      svgEl("line", { x1: x1 + 2, y1: Y + H / 2, x2: x2 - 2, y2: Y + H / 2, class: "edge" });
      svgEl("line", { x1: x1 + 2, y1: Y + H / 2, x2: x2 - 6, y2: Y + H / 2, class: "flow", id: "flow-" + i });
      svgEl("text", { x: (x1 + x2) / 2, y: Y + H / 2 - 10, "text-anchor": "middle", class: "edge-label", id: "edge-" + i }, "");
    }
  });
  const setText = (id, v) => { const e = document.getElementById(id); if (e) e.textContent = v; };
  const rate = v => slFmt(v, v >= 100 ? 0 : 1) + "/s";
  const ms = v => v === null || v === undefined ? "–" : slFmt(v) + " ms";

  const counters = document.getElementById("counters");
  const cardDefs = [["elapsed", "Elapsed", e => slFmt(e.elapsed_s, 1) + " s"], ["target", "Target now", e => e.target],
    ["scheduled", "Scheduled", e => e.scheduled], ["ok", "OK", e => e.ok], ["failed", "Failed", e => e.failed],
    ["dropped", "Dropped", e => e.dropped], ["cancelled", "Cancelled", e => e.cancelled],
    ["error_rate", "Error rate", e => slFmt(100 * e.error_rate, 2) + " %"], ["ttft", "TTFT p50 / p99 (whole run)", e => ms(e.ttft_p50_ms) + " / " + ms(e.ttft_p99_ms)],
    ["e2e", "E2E p50 / p99 (whole run)", e => ms(e.e2e_p50_ms) + " / " + ms(e.e2e_p99_ms)], ["lag", "Schedule lag p99", e => ms(e.lag_p99_ms)]];
  cardDefs.forEach(([id, label]) => { const c = slEl("div", { className: "card", id: "count-" + id }, '<div class="label">' + label + '</div><div class="value">–</div><div class="n"></div>'); counters.appendChild(c); });
  // a card turns red when its bound (the run's validity or thresholds) is crossed
  const crossed = { lag: e => ["lag_p99_ms", e.lag_p99_ms], dropped: e => ["dropped", e.dropped], error_rate: e => ["error_rate", e.error_rate] };
  function markBounds(e) {
    Object.keys(crossed).forEach(id => {
      const [key, v] = crossed[id](e), bound = state.bounds[key], card = document.getElementById("count-" + id);
      if (bound === undefined || bound === null) return;
      const bad = v !== null && v !== undefined && v > bound;
      card.classList.toggle("bad", bad);
      card.querySelector(".n").textContent = "bound " + (key === "error_rate" ? slFmt(100 * bound, 2) + " %" : key === "dropped" ? "0 (drops not allowed)" : slFmt(bound) + " ms") + (bad ? " — crossed" : "");
    });
  }
  function showVerdict(v) {  // the run's banner and its failures, as on the report
    const box = document.getElementById("verdict");
    box.className = "done"; box.innerHTML = "";
    slVerdict(box, v.banner);
    if (v.report) box.appendChild(slEl("p", { id: "report-link", className: "note" }, 'The run\'s report: <a href="file://' + slEsc(v.report) + '">' + slEsc(v.report)
      + "</a> (a file on this machine: open it from there; <code>surgelab report RUN</code> rebuilds it)"));
    slBounds(box, v.banner);
    if (v.banner && v.banner.command === "surgelab run") slFailures(box, v.errors, v.diagnosis);
  }
  function render() {
    const e = state.last; if (!e) return;
    setText("node-arrivals-1", rate(e.arrival_rate)); setText("node-arrivals-2", e.scheduled + " scheduled"); setText("node-arrivals-3", "target " + e.target);
    setText("node-queue-1", e.queue); setText("node-queue-2", e.dropped + " dropped"); setText("node-queue-3", "lag p99 " + ms(e.lag_p99_ms));
    setText("node-inflight-1", e.in_flight); setText("node-inflight-2", "sending " + rate(e.send_rate)); setText("node-inflight-3", "");
    const g = e.gauges || {};
    const has = k => g[k] !== undefined && g[k] !== null;
    setText("node-target-1", has("running") ? slFmt(g.running, 0) + " running" : "–");
    setText("node-target-2", has("waiting") ? slFmt(g.waiting, 0) + " waiting" : (Object.keys(g).length ? "" : "no telemetry (--scrape)"));
    setText("node-target-3", has("kv_usage") ? "KV cache " + slFmt(100 * g.kv_usage, 1) + " %" : "");
    setText("node-responses-1", rate(e.completion_rate)); setText("node-responses-2", e.ok + " ok · " + e.failed + " failed"); setText("node-responses-3", e.cancelled + " cancelled");
    setText("edge-0", rate(e.arrival_rate)); setText("edge-1", rate(e.send_rate)); setText("edge-2", e.in_flight + " open"); setText("edge-3", rate(e.completion_rate));
    for (let i = 0; i < 4; i++) { const f = document.getElementById("flow-" + i); if (f) f.style.opacity = state.finished ? 0 : 1; }
    cardDefs.forEach(([id, label, fn]) => { counters.querySelector("#count-" + id + " .value").textContent = fn(e); });
    markBounds(e);
    const share = e.duration_s > 0 ? Math.min(1, e.elapsed_s / e.duration_s) : 0;
    document.getElementById("progress-bar").style.width = (state.finished ? 100 : 100 * share).toFixed(1) + "%";
    document.getElementById("progress-text").textContent = state.finished ? "finished after " + slFmt(e.elapsed_s, 1) + " s"
      : slFmt(e.elapsed_s, 0) + " s of " + slFmt(e.duration_s, 0) + " s · " + slFmt(Math.max(0, e.duration_s - e.elapsed_s), 0) + " s remaining (" + slFmt(100 * share, 0) + " %)";
    const H = state.entries, t = H.map(x => x.elapsed_s);
    const curves = document.getElementById("curves");
    // the whole plan from the start: the axis does not grow with the run (nor shrink with a short one)
    const span = { title: { text: "elapsed (s)" }, range: [0, Math.max(e.duration_s || 0, e.elapsed_s)], autorange: false };
    // like for like: the target is averaged over the same trailing window as the achieved rates
    const tgt = H.map(x => x.target_rate === undefined ? null : x.target_rate);
    const thr = [slLine("arrivals/s", t, H.map(x => x.arrival_rate)), slLine("sent/s", t, H.map(x => x.send_rate)), slLine("completed/s", t, H.map(x => x.completion_rate), { line: { width: 3 } })];
    if (tgt.some(v => v !== null)) thr.unshift(slLine("target req/s", t, tgt, { line: { dash: "dash", color: "#111" } }));
    slChart(curves, "live-throughput", "Rates per second (all 5 s trailing means, target too)", thr, { xaxis: span, yaxis: { title: { text: "per second" }, rangemode: "tozero" } });
    const recent = H.some(x => x.recent_n !== undefined);  // per-request latencies reach the dashboard (with --workers or --ray, a flush later)
    const L = recent ? [["TTFT p50", "recent_ttft_p50_ms"], ["TTFT p99", "recent_ttft_p99_ms"], ["E2E p50", "recent_e2e_p50_ms"], ["E2E p99", "recent_e2e_p99_ms"]]
      : [["TTFT p50", "ttft_p50_ms"], ["TTFT p99", "ttft_p99_ms"], ["E2E p50", "e2e_p50_ms"], ["E2E p99", "e2e_p99_ms"]];
    slChart(curves, "live-latency", recent ? "Latency of the last 5 s (ms)" : "Latency so far, whole run (ms)", L.map(([n, k]) => slLine(n, t, H.map(x => x[k]),
      recent ? { text: H.map(x => "n = " + x.recent_n) } : {})), { xaxis: span, yaxis: { title: { text: "ms" }, rangemode: "tozero" } });
    const flight = [slLine("in flight", t, H.map(x => x.in_flight)), slLine("client queue", t, H.map(x => x.queue))];
    if (H.some(x => x.gauges && x.gauges.running !== undefined)) {
      flight.push(slLine("target running", t, H.map(x => x.gauges ? x.gauges.running : null), { line: { dash: "dot" } }),
                  slLine("target waiting", t, H.map(x => x.gauges ? x.gauges.waiting : null), { line: { dash: "dot" } }));
    }
    slChart(curves, "live-inflight", "In flight, client queue and the target's own counts", flight, { xaxis: span, yaxis: { title: { text: "requests" }, rangemode: "tozero" } });
    slChart(curves, "live-errors", "Errors (cumulative)", [slLine("failed", t, H.map(x => x.failed)), slLine("dropped", t, H.map(x => x.dropped)), slLine("cancelled", t, H.map(x => x.cancelled))], { xaxis: span, yaxis: { title: { text: "requests" }, rangemode: "tozero" } });
    if (recent) slChart(curves, "live-decode", "Output tokens/s and TPOT of the last 5 s", [slLine("output tokens/s", t, H.map(x => x.recent_tokens_per_s === undefined ? null : x.recent_tokens_per_s)),
      slLine("TPOT p50 (ms)", t, H.map(x => x.recent_tpot_p50_ms), { yaxis: "y2", line: { dash: "dot" } }), slLine("TPOT p99 (ms)", t, H.map(x => x.recent_tpot_p99_ms), { yaxis: "y2", line: { dash: "dot" } })],
      { xaxis: span, yaxis: { title: { text: "tokens per second" }, rangemode: "tozero" }, yaxis2: { overlaying: "y", side: "right", title: { text: "TPOT (ms)" }, rangemode: "tozero", showgrid: false }, margin: { l: 60, r: 60, t: 40, b: 80 } });
    if (state.points.length) {
      const p = state.points;
      slChart(document.getElementById("sweep"), "live-sweep", "Sweep: throughput against latency", [slLine("TTFT p99", p.map(r => r.throughput), p.map(r => r.ttft_p99_ms), { mode: "lines+markers" }),
        slLine("E2E p99", p.map(r => r.throughput), p.map(r => r.e2e_p99_ms), { mode: "lines+markers" })], { xaxis: { title: { text: "throughput (req/s)" } }, yaxis: { title: { text: "P99 latency (ms)" } }, hovermode: "closest" });
    }
  }
  async function poll() {
    try {
      const r = await fetch("api/state?since=" + state.seq + q, { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const d = await r.json();
      state.polls += 1;
      if (d.seq < state.seq) { state.entries = []; }  // a new run behind the same address: start over
      state.entries = state.entries.concat(d.history);
      state.seq = d.seq; state.points = d.points || []; state.finished = d.finished; state.bounds = d.bounds || {};
      if (d.history.length) state.last = d.history[d.history.length - 1];
      if (d.verdict) { state.verdict = d.verdict; showVerdict(d.verdict); }
      stopButton(d);
      document.getElementById("status").textContent = (d.finished ? "run finished" : "live") + " · " + state.entries.length + " samples";
      render();
    } catch (err) {
      state.errors += 1;
      document.getElementById("status").textContent = (state.finished ? "run finished · " : "") + "disconnected, retrying… (" + err.message + ")";
    }
    if (state.verdict) { document.getElementById("status").textContent = "run finished · the dashboard server has stopped; the page keeps the run as it ended"; return; }
    setTimeout(poll, 1000);
  }
  const stopper = document.getElementById("stop-run");
  function stopButton(d) {  // enabled while a run that takes interrupts is under way, until it was asked to stop
    state.stop_requested = d.stop_requested || state.stop_requested || null;
    stopper.disabled = !d.stoppable || state.stop_requested !== null;
    if (state.stop_requested) { stopper.textContent = d.finished ? "Stopped" : "Stopping…"; }
    if (d.finished && !state.stop_requested) stopper.parentElement.style.display = "none";  // nothing was stopped: no control left
  }
  stopper.addEventListener("click", async () => {
    if (stopper.disabled || !confirm("Stop the run now? Requests in flight may finish within the grace; the report is written.")) return;
    stopper.disabled = true;
    try {
      const r = await fetch("api/stop" + (token ? "?token=" + encodeURIComponent(token) : ""),
        { method: "POST", headers: { "X-Surgelab-Stop": stopper.dataset.token }, cache: "no-store" });
      const d = await r.json();
      if (r.status === 202) { state.stop_requested = d.stopping; stopper.textContent = "Stopping…"; }
      else { document.getElementById("stop-note").textContent = d.error || ("HTTP " + r.status); stopper.disabled = false; }
    } catch (err) { document.getElementById("stop-note").textContent = "could not reach the run: " + err.message; stopper.disabled = false; }
  });
  document.querySelector("header .sub").appendChild(document.getElementById("status"));
  poll();
})();
"""


def render_page(title: str, stop_token: str) -> str:
    """The page, its stop button holding ``stop_token`` (the run's: only this page has it)."""
    body = _BODY.replace("__STOP_TOKEN__", escape(stop_token))
    return page(
        f"{title} — live", "updates every second · 127.0.0.1 only", _CSS + body, [_JS], inline_plotly=False,
        script_srcs=["plotly.min.js"],
    )  # fmt: skip
