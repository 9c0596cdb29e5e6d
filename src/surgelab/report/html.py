"""``report.html``: one self-contained page (plotly embedded) drawn from ``ReportData``.

The page carries the model as JSON (``<script id="report-data">``) and draws every chart from
it in the browser. It exposes ``window.SURGELAB_REPORT`` (the model) and
``window.SURGELAB_CHARTS`` (for each chart drawn: its trace names and point counts), which is
what the browser tests assert on.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from surgelab.report.assets import plotly_js, script_safe
from surgelab.report.model import ReportData

__all__ = ["REPORT_FILE", "render_html", "page", "BASE_CSS", "CHART_JS"]

REPORT_FILE = "report.html"

BASE_CSS = """
:root { --fg:#1f2937; --muted:#6b7280; --line:#e5e7eb; --good:#15803d; --bad:#b91c1c; --accent:#2563eb; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0; background: #f8fafc; }
header { background: #0f172a; color: #f8fafc; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; } header .sub { color: #cbd5e1; font-size: 13px; }
main { padding: 16px 24px; max-width: 1400px; margin: auto; }
h2 { font-size: 16px; margin: 22px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.card .label { color: var(--muted); font-size: 12px; } .card .value { font-size: 22px; font-weight: 600; }
.card .unit { font-size: 12px; color: var(--muted); margin-left: 3px; }
.card .n { font-size: 11px; color: var(--muted); } .card.sparse { border-color: #f59e0b; background: #fffbeb; }
.card.sparse .n { color: #b45309; font-weight: 600; }
.card.good .value { color: var(--good); } .card.bad .value { color: var(--bad); } .card.none .value { color: var(--muted); }
.badge { display: inline-block; background: #f59e0b; color: #111827; border-radius: 4px; padding: 0 6px; font-weight: 700; margin-right: 6px; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(520px, 100%), 1fr)); gap: 12px; }
.grid3 { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(340px, 100%), 1fr)); gap: 12px; }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 8px; min-height: 340px; overflow: hidden; }
table { border-collapse: collapse; background: #fff; font-size: 13px; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; } #levels-table td:last-child { text-align: left; }
.pass { color: var(--good); font-weight: 600; } .fail { color: var(--bad); font-weight: 600; }
.warn { color: #b45309; font-weight: 600; }
.banner { border-radius: 8px; padding: 10px 14px; margin: 4px 0 12px; font-size: 15px; border: 1px solid; }
.banner .word { font-size: 18px; font-weight: 800; margin-right: 6px; } .banner .more { font-size: 13px; margin-top: 4px; }
.banner.pass { background: #dcfce7; color: #14532d; border-color: #86efac; }
.banner.fail, .banner.invalid { background: #fee2e2; color: #7f1d1d; border-color: #fca5a5; }
.banner.interrupted { background: #fef3c7; color: #78350f; border-color: #fcd34d; }
.problem { color: var(--bad); font-weight: 600; border-left: 4px solid var(--bad); padding-left: 8px; }
.scroll { overflow-x: auto; max-width: 100%; } td.text { text-align: left; }
@media (max-width: 600px) { header, main { padding-left: 10px; padding-right: 10px; } .grid2, .grid3 { grid-template-columns: minmax(0, 1fr); }
  .cards { grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); } }
.ns { color: var(--muted); } tr.sparse td { color: #94a3b8; background: #f8fafc; } .note { color: var(--muted); font-size: 12px; }
"""

CHART_JS = r"""
window.SURGELAB_CHARTS = window.SURGELAB_CHARTS || {};
const SL_COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
function slChart(parent, id, title, traces, layout) {
  let div = document.getElementById(id);
  const isNew = !div;
  if (isNew) { div = document.createElement("div"); div.id = id; div.className = "chart"; parent.appendChild(div); }
  traces = traces.filter(t => t && ((t.x && t.x.length) || (t.y && t.y.length)));
  const base = { title: { text: title, font: { size: 14 } }, margin: { l: 60, r: 20, t: 40, b: 80 },
                 legend: { orientation: "h", y: -0.3 }, height: 340, hovermode: "x unified" };
  const full = Object.assign(base, { showlegend: traces.length > 0 }, layout || {});
  if (!traces.length) full.annotations = [{ text: "no data", xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, font: { size: 16, color: "#6b7280" } }];
  if (isNew || !div.data) { Plotly.newPlot(div, traces, full, { displayModeBar: false, responsive: true }); }
  else { Plotly.react(div, traces, full); }
  window.SURGELAB_CHARTS[id] = { title: title, traces: traces.map(t => t.name || ""),
    points: traces.map(t => (t.x || t.y || []).filter(v => v !== null).length) };
  return div;
}
function slSettle() {  // charts drawn before their grid filled up take their final width now
  Promise.all(Array.from(document.querySelectorAll(".chart")).map(d => Plotly.Plots.resize(d)))
    .then(() => { window.SURGELAB_READY = true; });
}
function slLine(name, x, y, extra) { return Object.assign({ name: name, x: x, y: y, type: "scatter", mode: "lines" }, extra || {}); }
function slSparse(name, x, y, n, need, color, size) {  // a percentile from fewer than ``need`` values: hollow grey markers, apart from the firm line
  const text = n.map(k => "n = " + k), out = [];
  const firm = y.map((v, i) => n[i] >= need ? v : null), thin = y.map((v, i) => n[i] < need ? v : null);
  if (firm.some(v => v !== null)) out.push(slLine(name, x, firm, { connectgaps: false, line: { color: color }, text: text }));
  if (thin.some(v => v !== null)) out.push(slLine(name + " (sparse: n < " + need + ")", x, thin, { mode: "markers", text: text, marker: { color: "#cbd5e1", size: size || 5, line: { color: color, width: 1 } } }));
  return out;
}
function slFmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  const a = Math.abs(v); const d = digits !== undefined ? digits : (Number.isInteger(v) || a >= 100 ? 0 : a >= 10 ? 1 : 2);
  return v.toLocaleString(undefined, { minimumFractionDigits: d, maximumFractionDigits: d });
}
function slEl(tag, attrs, html) { const e = document.createElement(tag); Object.assign(e, attrs || {}); if (html !== undefined) e.innerHTML = html; return e; }
function slTable(parent, head, rows) {  // in a box of its own that scrolls sideways on a narrow screen
  const t = slEl("table"), box = slEl("div", { className: "scroll" });
  t.appendChild(slEl("tr", {}, head.map(h => "<th>" + h + "</th>").join("")));
  rows.forEach(r => t.appendChild(slEl("tr", {}, r.map(c => "<td>" + c + "</td>").join(""))));
  box.appendChild(t); parent.appendChild(box); return t;
}
function slEsc(t) { return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }
function slVerdict(parent, v, label, before) {  // the banner: the verdict, the exit status, the stop reason, the first failing bound
  if (!v) return null;
  const more = [];
  if (v.first_failure) more.push("first failing bound: " + slEsc(v.first_failure));
  if (v.failures.length > 1) more.push("also: " + v.failures.slice(1).map(slEsc).join("; "));
  v.invalid.forEach(r => more.push("invalid: " + slEsc(r)));
  if (v.headline && v.word === "PASS") more.push(slEsc(v.headline));
  (v.notes || []).forEach(n => more.push(slEsc(n)));
  const box = slEl("div", { className: "banner " + v.word.toLowerCase() },
    (label ? slEsc(label) + ": " : "") + '<span class="word">' + v.word + "</span> " + slEsc(v.command) + " exit " + v.exit_code
    + " · stop: " + slEsc(v.stop_reason || "–") + more.map(m => '<div class="more">' + m + "</div>").join(""));
  parent.insertBefore(box, before || null); return box;
}
function slBounds(parent, v) {  // the banner's bounds as a table, each default one marked, its value in its unit
  if (!v || !v.bounds.length) return;
  slTable(parent, ["threshold", "observed", "verdict"], v.bounds.map(t => [slEsc(t.expr), slEsc(t.observed),
    t.passed ? '<span class="pass">pass</span>' : '<span class="fail">FAIL</span>'])).id = "thresholds-table";
}
function slProblems(parent, problems) {  // inputs that could not be read: said in red, never silently less
  (problems || []).forEach(p => parent.appendChild(slEl("p", { className: "problem" }, "Not shown: " + slEsc(p))));
}
function slFailures(parent, errors, hints) {  // summary.json's errors: one row a cause, numbers masked; then the hints
  if (errors && errors.length) {
    const t = slTable(parent, ["state", "HTTP", "message (numbers as #)", "count", "first (s)", "last (s)"], errors.map(e =>
      [slEsc(e.state), e.http_status === null ? "–" : e.http_status, '<span title="' + slEsc(e.message) + '">' + slEsc(e.pattern || e.message || "no message") + "</span>",
       e.count.toLocaleString(), slFmt(e.first_s, 1), slFmt(e.last_s, 1)]));
    t.id = "failures-table"; t.querySelectorAll("tr").forEach(r => { if (r.cells[2]) r.cells[2].className = "text"; });
  } else parent.appendChild(slEl("p", { className: "note", id: "failures-none" }, "No request failed."));
  (hints || []).forEach(h => parent.appendChild(slEl("p", { className: "warn hint" }, "Diagnosis: " + slEsc(h))));
}
"""

_REPORT_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById("report-data").textContent);
  window.SURGELAB_REPORT = D;
  const S = D.summary, T = D.timeseries, root = document.getElementById("report");
  const section = (title, cls) => { root.appendChild(slEl("h2", {}, title)); const g = slEl("div", { className: cls || "grid2" }); root.appendChild(g); return g; };

  slVerdict(root, D.verdict);
  slProblems(root, D.problems);
  const cards = section("Summary", "cards");
  D.cards.forEach(c => {
    const e = slEl("div", { className: "card " + (c.status || ""), title: c.detail || "" });
    e.id = "card-" + c.id;
    e.innerHTML = '<div class="label">' + c.label + '</div><div class="value">' + slFmt(c.value, c.digits) + '<span class="unit">' + c.unit + "</span></div>"
      + (c.n !== undefined || c.note ? '<div class="n">' + [c.n !== undefined ? "n = " + c.n.toLocaleString() : "", c.note || ""].filter(x => x).join(" · ") + "</div>" : "");
    cards.appendChild(e);
  });
  const warm = T && T.warmup_end_s ? { shapes: [{ type: "rect", xref: "x", yref: "paper", x0: 0, x1: T.warmup_end_s, y0: 0, y1: 1,
    fillcolor: "#94a3b8", opacity: 0.15, line: { width: 0 } }] } : {};
  const xs = { xaxis: { title: { text: "time (s)" }, zeroline: false } };
  const lay = (y, extra) => Object.assign({}, warm, xs, { yaxis: { title: { text: y }, rangemode: "tozero" } }, extra || {});
  if (D.kind === "run") {
  slBounds(root, D.verdict);
  if (D.slo) {
    const share = D.slo.counted ? 100 * D.slo.misses / D.slo.counted : 0;
    const p = slEl("p", { id: "slo-line", className: D.slo.misses ? "fail" : "pass" },
      "SLO: " + D.slo.text + " — " + D.slo.misses.toLocaleString() + " of " + D.slo.counted.toLocaleString() + " measured requests missed it (" + slFmt(share, 1) + " %)");
    root.appendChild(p);
  }
  if (!S.validity.valid) root.appendChild(slEl("p", { className: "fail" }, "Run INVALID: " + S.validity.reasons.join("; ")));
  (S.warnings || []).forEach(w => root.appendChild(slEl("p", { className: "warn" }, "Warning: " + w)));


  const load = section("Load: target against achieved");
  const tgt = T.target;
  const loadTraces = [slLine("arrivals/s", T.t, T.arrivals_per_s), slLine("sent/s", T.t, T.sends_per_s),
                      slLine("throughput (ok)/s", T.t, T.throughput_per_s, { line: { width: 3 } })];
  if (tgt && tgt.unit === "req/s") loadTraces.unshift(slLine("target (req/s)", T.t, tgt.level, { line: { dash: "dash", color: "#111", shape: "hv" } }));
  slChart(load, "chart-load", "Requests per second (1 s windows)", loadTraces, lay("per second"));
  const flight = [slLine("in flight (measured)", T.t, T.in_flight), slLine("Little's Law λ·W", T.t, T.littles_law, { line: { dash: "dot" } })];
  if (tgt && tgt.unit === "users") flight.unshift(slLine("target users", T.t, tgt.level, { line: { dash: "dash", color: "#111" } }));
  slChart(load, "chart-inflight", "In flight against Little's Law (L = λW)", flight, lay("requests"));
  slChart(load, "chart-tokens", "Output tokens per second (successes, by completion)", [slLine("output tokens/s", T.t, T.output_tokens_per_s, { line: { color: SL_COLORS[2] } })], lay("tokens per second"));

  const lat = section("Latency over time (1 s windows, by completion)");
  const sloLine = k => {  // the objective as a red dashed line across the chart
    const v = D.slo && D.slo.ms[k];
    if (v === undefined || v === null) return {};
    return { shapes: (warm.shapes || []).concat([{ type: "line", xref: "paper", x0: 0, x1: 1, y0: v, y1: v, line: { dash: "dash", color: "#b91c1c" } }]),
             annotations: [{ xref: "paper", x: 1, y: v, text: k.toUpperCase() + " SLO " + slFmt(v) + " ms", showarrow: false, yanchor: "bottom", xanchor: "right", font: { color: "#b91c1c" } }] };
  };
  const pctTraces = P => {  // a window's percentile from too few requests is drawn grey, apart from the rest
    const out = [], colors = { p50: SL_COLORS[0], p90: SL_COLORS[4], p99: SL_COLORS[1] };
    ["p50", "p90", "p99"].forEach(q => out.push(...slSparse(q, T.t, P[q], P.n, P.min_n[q], colors[q])));
    return out;
  };
  slChart(lat, "chart-ttft-time", "TTFT percentiles (grey: too few requests in the window)", pctTraces(T.ttft_ms), lay("TTFT (ms)", sloLine("ttft")));
  slChart(lat, "chart-e2e-time", "E2E percentiles (grey: too few requests in the window)", pctTraces(T.e2e_ms), lay("E2E (ms)", sloLine("e2e")));

  const dist = section("Distributions (CDF, measured successes)", "grid3");
  [["cdf-ttft", "TTFT", D.cdfs.ttft_ms], ["cdf-itl", "Inter-token latency", D.cdfs.itl_ms], ["cdf-e2e", "E2E", D.cdfs.e2e_ms]].forEach(([id, name, c]) =>
    slChart(dist, "chart-" + id, name + " CDF", [slLine(name, c.x, c.p)], { xaxis: { title: { text: "ms" } }, yaxis: { title: { text: "fraction ≤ x" }, range: [0, 1] }, hovermode: "closest" }));

  root.appendChild(slEl("h2", {}, "Failures (largest groups, from summary.json)"));
  const fails = slEl("div", { id: "failures" }); root.appendChild(fails);
  slFailures(fails, S.errors, S.diagnosis);
  const err = section("Errors and schedule lag");
  const states = Object.keys(T.errors).filter(k => T.errors[k].some(v => v > 0));
  const errTraces = states.length ? states.map(k => ({ name: k, x: T.t, y: T.errors[k], type: "bar" }))
    : [slLine("all failure states (none)", T.t, T.t.map(() => 0))];
  slChart(err, "chart-errors", "Requests ending in a failure state, per second", errTraces, lay("per second", { barmode: "stack" }));
  if (T.slo_misses) slChart(err, "chart-slo", "Requests missing the SLO (failed or too slow), per second", [{ name: "missed the SLO", x: T.t, y: T.slo_misses, type: "bar", marker: { color: "#b91c1c" } }], lay("requests per second"));
  slChart(err, "chart-lag", "Schedule lag (sent − intended), by intended time", [slLine("p50", T.t, T.lag_ms.p50), slLine("p99", T.t, T.lag_ms.p99)], lay("ms"));

  const groups = [["by_class", "request class"], ["by_tier", "tier"], ["by_phase", "phase"], ["by_kind", "request kind"]];
  const split = groups.filter(([key]) => Object.keys(D.breakdowns[key] || {}).length >= 2);  // one group repeats the cards
  const bd = split.length ? section("Breakdowns: per class, per tier, per phase, per kind", "grid3") : null;
  split.forEach(([key, label]) => {
    const g = D.breakdowns[key]; const names = Object.keys(g);
    const metrics = [["ttft_p50", "TTFT p50"], ["ttft_p99", "TTFT p99"], ["e2e_p50", "E2E p50"], ["e2e_p99", "E2E p99"]];
    slChart(bd, "chart-" + key, "Latency per " + label + " (ms)", metrics.map(([m, n]) => ({ name: n, x: names, y: names.map(k => g[k][m]), type: "bar" })),
      { barmode: "group", hovermode: "closest", xaxis: { title: { text: label } }, yaxis: { title: { text: "latency (ms)" } } });
  });
  const bdt = slEl("div"); root.appendChild(bdt);
  split.forEach(([key, label]) => {
    const g = D.breakdowns[key];
    slTable(bdt, [label, "measured", "req/s", "goodput/s", "error rate", "TTFT p50", "TTFT p99", "E2E p50", "E2E p99"],
      Object.keys(g).map(k => [k, g[k].measured, slFmt(g[k].throughput), slFmt(g[k].goodput), slFmt(100 * g[k].error_rate) + " %",
        slFmt(g[k].ttft_p50), slFmt(g[k].ttft_p99), slFmt(g[k].e2e_p50), slFmt(g[k].e2e_p99)]));
  });

  }
  if (D.telemetry) {
    const tel = section("Server telemetry");
    const TL = D.telemetry, names = Object.keys(TL.series), label = n => (TL.labels || {})[n] || n;
    const frac = new Set(TL.fractions || []), counts = names.filter(n => !frac.has(n)), fr = names.filter(n => frac.has(n));
    const y2 = { overlaying: "y", side: "right", title: { text: "fraction (0–1)" }, range: [0, 1.05], showgrid: false };
    const wide = { margin: { l: 60, r: 70, t: 40, b: 80 } };  // room for the right axis and its title
    slChart(tel, "chart-telemetry", "Server gauges (1 s means)", counts.map(n => slLine(label(n), TL.t, TL.series[n]))
      .concat(fr.map(n => slLine(label(n), TL.t, TL.series[n], { yaxis: "y2", line: { dash: "dot" } }))),
      lay("count", Object.assign(fr.length ? { yaxis2: y2 } : {}, wide)));
    slChart(tel, "chart-telemetry-overlay", "Server gauges against the client's in flight", [slLine("client in flight", T.t, T.in_flight, { line: { width: 3, color: "#111" } })]
      .concat(counts.map(n => slLine(label(n), TL.t, TL.series[n])))
      .concat(fr.map(n => slLine(label(n), TL.t, TL.series[n], { yaxis: "y2", line: { dash: "dot" } }))),
      lay("requests", Object.assign(fr.length ? { yaxis2: y2 } : {}, wide)));
  }
  if (D.server_latency) {
    const sl = section("The server's own latency histograms against the client's", "grid2");
    Object.keys(D.server_latency).forEach(role => {
      const H = D.server_latency[role], f = v => v === null ? "—" : slFmt(v, 1) + " ms";
      const head = (role === "ttft" ? "TTFT" : "E2E") + " by bucket: server, client";
      const box = slEl("div"); sl.appendChild(box);
      slChart(box, "chart-server-" + role, head, [
        { name: "server (" + H.server_total.toLocaleString() + ")", x: H.buckets, y: H.server, type: "bar", marker: { color: "#2563eb" } },
        { name: "client (" + H.client_total.toLocaleString() + ")", x: H.buckets, y: H.client, type: "bar", marker: { color: "#111827" } },
      ], { barmode: "group", xaxis: { title: { text: "bucket" }, type: "category" }, yaxis: { title: { text: "requests" }, rangemode: "tozero" }, hovermode: "closest" });
      const p = slEl("p", { className: "note", id: "server-" + role + "-note" },
        H.engine + "'s " + H.metric + ": server P50 " + f(H.server_ms.p50) + ", P99 " + f(H.server_ms.p99)
        + "; the client's " + H.client_total.toLocaleString() + " ok requests (warm-up included) in the same buckets: P50 "
        + f(H.client_bucketed_ms.p50) + ", P99 " + f(H.client_bucketed_ms.p99) + ". "
        + (H.note ? "Note: " + H.note + ". " : "") + "Client exact: P50 " + f(H.client_ms.p50) + ", P99 " + f(H.client_ms.p99) + ". Percentiles from buckets are read as PromQL reads them (linear inside a bucket), for both sides alike; the client's clock starts at its intended send time, the server's when its front end takes the request.");
      box.appendChild(p);
    });
  }
  const X = D.extensions || {};
  if (X.sweep && X.sweep.points.length) {
    const W = X.sweep, p = W.points, need = W.min_count_p99 || 500;
    if (W.knee) root.appendChild(slEl("p", { id: "knee-reason", className: W.knee.sparse ? "warn" : "note" },
      "Knee at offered " + slFmt(W.knee.offered) + " " + W.unit + " (" + slFmt(W.knee.throughput) + " req/s achieved): " + W.knee.reason
      + (W.knee.sparse ? " — rests on a sparse tail: that level's P99 is of fewer than " + need + " requests" : "")));
    // each latency on its own axis (TPOT's 7–10 ms under E2E's 2,900 ms sat on the floor), its SLO line and the knee on each
    const sw = section("Sweep: latency against throughput (P99 per level, each on its own axis)");
    const x = p.map(r => r.throughput), slo = W.slo_ms || {};
    const sloShape = k => slo[k] === undefined || slo[k] === null ? [] : [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: slo[k], y1: slo[k], line: { dash: "dash", color: "#b91c1c" } }];
    const sloNote = k => slo[k] === undefined || slo[k] === null ? [] : [{ xref: "paper", x: 1, y: slo[k], text: k.toUpperCase() + " SLO " + slFmt(slo[k]) + " ms", showarrow: false, yanchor: "bottom", xanchor: "right", font: { color: "#b91c1c" } }];
    const knee = W.knee && W.knee.throughput !== undefined && W.knee.throughput !== null;
    const kneeShape = knee ? [{ type: "line", yref: "paper", y0: 0, y1: 1, x0: W.knee.throughput, x1: W.knee.throughput, line: { dash: "dot", color: "#111" } }] : [];
    const kneeNote = knee ? [{ yref: "paper", y: 1, x: W.knee.throughput, text: "knee " + slFmt(W.knee.throughput) + " req/s", showarrow: false, yanchor: "bottom" }] : [];
    const levelTraces = (keys) => keys.flatMap(([k, name, color]) => {
      const y = p.map(r => r[k + "_p99_ms"]);
      if (!y.some(v => v !== null && v !== undefined)) return [];
      return slSparse(name + " p99", x, y, p.map(r => r.measured), need, color, 9).map(t => Object.assign(t, { mode: t.mode === "lines" ? "lines+markers" : t.mode }));
    });
    [["chart-sweep", "TTFT", [["ttft", "TTFT", SL_COLORS[0]]], ["ttft"]], ["chart-sweep-e2e", "E2E", [["e2e", "E2E", SL_COLORS[1]]], ["e2e"]],
     ["chart-sweep-decode", "ITL and TPOT", [["itl", "ITL", SL_COLORS[3]], ["tpot", "TPOT", SL_COLORS[2]]], ["itl", "tpot"]]].forEach(([id, name, keys, slos]) => {
      const tr = levelTraces(keys);
      if (!tr.length) return;
      slChart(sw, id, name + " P99 per level", tr, { xaxis: { title: { text: "achieved throughput (req/s)" } }, yaxis: { title: { text: name + " P99 (ms)" }, rangemode: "tozero" },
        shapes: slos.flatMap(sloShape).concat(kneeShape), annotations: slos.flatMap(sloNote).concat(kneeNote), hovermode: "closest" });
    });
    const loadTr = [slLine("achieved", p.map(r => r.offered), p.map(r => W.unit === "req/s" ? r.achieved : r.throughput), { mode: "lines+markers" })];
    if (W.unit === "req/s") loadTr.push(slLine("ideal (achieved = offered)", p.map(r => r.offered), p.map(r => r.offered), { line: { dash: "dash", color: "#94a3b8" } }),
                                          slLine("throughput (ok/s)", p.map(r => r.offered), p.map(r => r.throughput), { mode: "lines+markers" }));
    if (p.some(r => r.goodput !== null && r.goodput !== undefined)) loadTr.push(slLine("goodput (within every SLO)", p.map(r => r.offered), p.map(r => r.goodput), { mode: "lines+markers", line: { color: "#9333ea", dash: "dot" } }));
    slChart(sw, "chart-sweep-load", "Offered against achieved and goodput", loadTr, { xaxis: { title: { text: "offered (" + W.unit + ")" } }, yaxis: { title: { text: "req/s" }, rangemode: "tozero" }, hovermode: "closest" });
    const lv = slEl("div"); root.appendChild(slEl("h2", {}, "Levels")); root.appendChild(lv);
    // a sparse P99 is marked in its own cell: the level's counts, rates and medians stay readable
    const pct = (r, k) => { const v = r[k]; return v === null || v === undefined ? "–" : (r.sparse && k.indexOf("p99") >= 0 ? '<span class="ns sparse-cell" title="P99 of fewer than ' + need + ' requests">' + slFmt(v) + "*</span>" : slFmt(v)); };
    const link = r => r.run_dir ? '<a href="' + slEsc(r.run_dir) + '/report.html">' + slEsc(r.run_dir) + "</a>" : "–";
    const lt = slTable(lv, ["offered (" + W.unit + ")", "achieved", "n", "req/s", "goodput", "TTFT p50", "TTFT p99", "E2E p50", "E2E p99", "ITL p99", "TPOT p99", "errors", "validity", "report", "diagnosis"],
      p.map(r => [slFmt(r.offered) + (W.knee && r.offered === W.knee.offered ? " ◀ knee" : ""), slFmt(r.achieved), r.measured.toLocaleString(), slFmt(r.throughput), slFmt(r.goodput),
        pct(r, "ttft_p50_ms"), pct(r, "ttft_p99_ms"), pct(r, "e2e_p50_ms"), pct(r, "e2e_p99_ms"), pct(r, "itl_p99_ms"), pct(r, "tpot_p99_ms"), slFmt(100 * r.error_rate, 1) + " %",
        r.valid ? '<span class="pass">valid</span>' : '<span class="fail" title="' + r.validity_reasons.join("; ") + '">INVALID</span>', link(r), (r.diagnosis || []).join("; ")]));
    lt.id = "levels-table";
    root.appendChild(slEl("p", { className: "note" }, "Latencies in ms. * and grey: that P99 rests on fewer than " + need + " requests (5 beyond it); the level is left out of the latency knee. Each level is a run of its own: its report is linked."));
    if (W.plan) {
      const P = W.plan, pb = slEl("div"); root.appendChild(slEl("h2", {}, "SLA capacity")); root.appendChild(pb);
      const rows = [["level", slFmt(P.level) + " " + W.unit], ["throughput", slFmt(P.requests_per_s) + " req/s"], ["output tokens", slFmt(P.output_tokens_per_s) + " tok/s"],
        ["mean in flight", slFmt(P.mean_in_flight, 2)], ["error rate", slFmt(100 * P.error_rate, 2) + " % (limit " + slFmt(100 * P.max_error_rate, 1) + " %)"],
        ["objectives met", (P.slo || []).join(", ") || "none"], ["requests at that level", P.measured === null ? "–" : P.measured.toLocaleString() + (P.sparse ? " — sparse tail: its P99 rests on fewer than " + need + " requests" : "")],
        ["level valid", P.valid ? "yes" : "NO"]];
      slTable(pb, ["SLA capacity", ""], rows).id = "capacity-table";
    }
  }
  if (X.fleet && X.fleet.t) {
    const fl = section("Simulation: fleet timeline");
    const F = X.fleet, CS = F.cold_start, whole = { range: [0, F.end_s || F.t[F.t.length - 1]], autorange: false };  // the whole run, not to the last sample
    const fx = (y, extra) => { const l = lay(y, extra); l.xaxis = Object.assign({}, l.xaxis, whole); return l; };
    const ev = F.events || [], marks = ev.map(e => ({ type: "line", yref: "paper", y0: 0, y1: 1, x0: e.t, x1: e.t, line: { dash: "dot", color: e.to > e.from ? "#15803d" : "#b45309", width: 1 } }));
    if (CS) root.insertBefore(slEl("p", { id: "cold-start", className: "warn" }, "Cold start: provisioned replicas were not ready for " + slFmt(CS.seconds) + " s of the run (from "
      + slFmt(CS.first_s) + " s); at " + slFmt(CS.worst_t) + " s " + CS.worst_ready + " of " + CS.worst_replicas + " replicas were ready."), fl);
    slChart(fl, "chart-fleet", "Replicas: provisioned, ready",
      [slLine("provisioned", F.t, F.replicas, { line: { shape: "hv" } }), slLine("ready", F.t, F.ready, { line: { shape: "hv", dash: "dash" } })],
      fx("replicas", { shapes: (warm.shapes || []).concat(marks) }));
    slChart(fl, "chart-fleet-requests", "Requests in replicas and queued",
      [slLine("waiting inside replicas", F.t, F.engine_waiting), slLine("held by replicas (waiting + running)", F.t, F.in_flight),
       slLine("router queue", F.t, F.queue), slLine("shed per interval", F.t, F.shed)], fx("requests"));
    slChart(fl, "chart-fleet-util", "Utilisation of ready replicas", [slLine("utilisation", F.t, F.utilisation.map(v => v === null ? null : 100 * v))],
      fx("% of the interval", { yaxis: { title: { text: "% of the interval" }, range: [0, 105] } }));
    if (F.cost_per_hour) slChart(fl, "chart-fleet-cost", "Cost per hour", [slLine("cost/h", F.t, F.cost_per_hour, { line: { shape: "hv" } })], fx("cost per hour (cost_per_hour's unit)"));
    root.appendChild(slEl("p", { className: "note" }, "Provisioned: replicas asked for (starting, ready or restarting: billed); ready: serving. "
      + (ev.length ? "Dotted lines: scaling decisions (green up, amber down). " : "") + "Waiting inside replicas: requests in the engines' queues, not yet running; "
      + "the router queue holds those no replica had room for. Utilisation: the share of each interval the ready replicas spent stepping."));
    if (ev.length) {
      const st = slEl("div"); root.appendChild(slEl("h2", {}, "Scaling events")); root.appendChild(st);
      slTable(st, ["time (s)", "pool", "replicas", "metric"], ev.map(e => [slFmt(e.t), e.pool, e.from + " → " + e.to, e.metric === null ? "–" : slFmt(e.metric, 2)])).id = "scaling-table";
    }
  }
  if (X.rate_limits && X.rate_limits.t) {
    const rl = section("Provider rate limits (from its response headers)");
    const R = X.rate_limits;
    slChart(rl, "chart-rate-limits", "Quota left and 429s, per second",
      [slLine("requests left (most)", R.t, R.remaining_requests_most, { line: { shape: "hv", dash: "dash" } }),
       slLine("requests left (fewest)", R.t, R.remaining_requests, { line: { shape: "hv" } }),
       slLine("tokens left (fewest)", R.t, R.remaining_tokens, { yaxis: "y2", line: { shape: "hv", dash: "dot" } }),
       { name: "429 per second", x: R.t, y: R.throttled_per_s, type: "bar", opacity: 0.5, marker: { color: "#b91c1c" } }],
      lay("requests", { margin: { r: 70 }, yaxis2: { overlaying: "y", side: "right", tickformat: "~s", rangemode: "tozero", title: { text: "tokens" } } }));
  }
  slSettle();
})();
"""


def page(
    title: str, subtitle: str, body: str, scripts: list[str], *, inline_plotly: bool = True, script_srcs: Sequence[str] = ()
) -> str:  # fmt: skip
    """A complete page: CSS, plotly (inline, or from ``script_srcs``), the chart helpers, ``scripts`` in order."""
    parts = [f"<script>{script_safe(plotly_js())}</script>"] if inline_plotly else []
    parts += [f'<script src="{escape(src)}"></script>' for src in script_srcs]
    parts.append(f"<script>{CHART_JS}</script>")
    parts += [f"<script>{s}</script>" for s in scripts]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{BASE_CSS}</style></head><body>"
        f'<header><h1>{escape(title)}</h1><div class="sub">{escape(subtitle)}</div></header>'
        f"<main>{body}</main>{''.join(parts)}</body></html>\n"
    )


def render_html(data: ReportData) -> str:
    s = data.summary
    target = s.get("target", {})
    where = target.get("url", "")
    if data.simulated:  # nothing was contacted: the fleet and the simulated span instead of a URL
        fleet = data.run_info.get("fleet") or (s.get("fleet") or {}).get("name", "")
        where = f"SIMULATED fleet {fleet} · {data.timeseries.get('span_s', 0):,.0f} s of simulated time"
    subtitle = (
        f"{s.get('mode', '')} loop · {where} · {target.get('model', '')} · started {s.get('started_at', '')}"
        f" · {s.get('stop_reason', '')} · report v{data.version}"
    )
    if data.kind != "run":
        subtitle = f"{data.kind} · {s.get('stop_reason', '')} · report v{data.version}"
    body = (
        f'<script type="application/json" id="report-data">{script_safe(data.to_json())}</script>'
        '<div id="report"></div>'
        '<p class="note">Generated by surgelab from records.parquet and summary.json; latencies are measured from the '
        "intended send time. Shaded: warm-up (excluded from the summary).</p>"
    )
    title = f"surgelab report — {data.name}" + (" (simulated)" if data.simulated else "")
    return page(title, subtitle, body, [_REPORT_JS])
