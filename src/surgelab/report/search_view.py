"""``search.html``: a deployment search as a page — the winner, the front of cost against P99 E2E,
every configuration with its status and reason in a table that sorts, and the winner's fleet file.

Like the other pages it carries its model as JSON (``search.json``'s content) and draws from it
in the browser; it reads plain data, so the report package does not depend on the planner.
"""

from __future__ import annotations

import json
from typing import Any

from surgelab.report.assets import script_safe
from surgelab.report.html import page

__all__ = ["SEARCH_FILE", "render_search_html"]

SEARCH_FILE = "search.html"

_SEARCH_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById("search-data").textContent);
  window.SURGELAB_REPORT = D;
  const S = D.search, W = S.winner, root = document.getElementById("report");
  const esc = t => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const section = (title, cls) => { root.appendChild(slEl("h2", {}, title)); const g = slEl("div", { className: cls || "grid2" }); root.appendChild(g); return g; };
  const cards = section("Cheapest fleet that meets the objective", "cards");
  const latency = o => { const t = (o.trials || []).find(t => t.passed && !t.pessimistic && t.replicas === o.replicas); return t || null; };
  const wl = W ? latency(W) : null;
  [["winner", "Configuration", W ? W.candidate.label : "none passed", ""], ["replicas", "Replicas (robust)", W ? (W.candidate.autoscale ? W.replicas_text : W.robust_replicas) : null, ""],
   ["cost", "Cost / hour", W ? W.cost_per_hour : null, ""], ["p99", "P99 E2E at the peak", wl ? wl.p99_e2e_ms : null, "ms"],
   ["peak", "Peak", S.peak_rps, "req/s"], ["configs", "Configurations", S.configurations, ""], ["sims", "Simulations", S.simulations, ""]]
   .forEach(([id, label, v, unit]) => cards.appendChild(slEl("div", { className: "card" + (id === "winner" && !W ? " bad" : ""), id: "card-" + id },
     '<div class="label">' + label + '</div><div class="value">' + (typeof v === "string" ? esc(v) : slFmt(v)) + '<span class="unit">' + unit + "</span></div>")));
  root.appendChild(slEl("p", { className: "note", id: "objective" }, "Objective: " + S.slo.map(esc).join(", ") + " at " + slFmt(S.peak_rps) + " req/s. "
    + (S.model_error ? "Engine model: " + esc(S.model_error) + "." : "")));
  const passed = S.outcomes.filter(o => o.status === "passed" && latency(o));
  const front = new Set(S.front);
  const chart = section("Cost against P99 E2E (passing configurations at their fewest replicas)", "grid1");
  const trace = (name, list, marker) => ({ name: name, type: "scatter", mode: "markers", x: list.map(o => o.cost_per_hour), y: list.map(o => latency(o).p99_e2e_ms),
    text: list.map(o => o.candidate.label + " × " + o.replicas_text), hovertemplate: "%{text}<br>%{x:.2f}/h, P99 E2E %{y:.0f} ms<extra></extra>", marker: marker });
  const onFront = passed.filter(o => front.has(o.candidate.label)), off = passed.filter(o => !front.has(o.candidate.label));
  const traces = [trace("passing", off, { color: "#94a3b8", size: 8 }), trace("Pareto front", onFront, { color: "#2563eb", size: 10 })];
  if (W && wl) traces.push(trace("chosen", [W], { color: "#15803d", size: 16, symbol: "star" }));
  slChart(chart, "chart-front", "The front: no other configuration is both cheaper and faster", traces,
    { xaxis: { title: { text: "cost per hour" }, rangemode: "tozero" }, yaxis: { title: { text: "P99 E2E (ms)" }, rangemode: "tozero" }, hovermode: "closest" });
  const counts = Object.entries(S.by_status).map(([k, v]) => v + " " + k).join(", ");
  root.appendChild(slEl("h2", {}, "Every configuration (" + counts + ")"));
  const box = slEl("div", { className: "scroll" }); root.appendChild(box);
  const head = ["configuration", "status", "floor", "replicas", "robust", "cost/h", "P99 TTFT ms", "P99 E2E ms", "why"];
  const rows = S.outcomes.map(o => { const t = latency(o); return [o.candidate.label, o.status, o.floor || "", o.candidate.autoscale ? o.replicas_text : o.replicas || "", o.robust_replicas || "",
    o.cost_per_hour === null ? "" : o.cost_per_hour, t ? t.p99_ttft_ms : "", t ? t.p99_e2e_ms : "", o.reason || ""]; });
  const table = slTable(box, head, rows.map(r => r.map((c, i) => i === 1 ? '<span class="' + (c === "passed" ? "pass" : c === "pruned" || c === "failed" ? "fail" : "ns") + '">' + c + "</span>"
    : typeof c === "number" ? slFmt(c) : esc(c))));
  table.id = "search-table";
  let order = -1;  // the first click sorts ascending
  table.querySelectorAll("th").forEach((th, k) => { th.style.cursor = "pointer"; th.title = "sort";
    th.onclick = () => { order = -order; const body = Array.from(table.querySelectorAll("tr")).slice(1);
      const key = r => { const v = rows[r.dataset.i][k]; return typeof v === "number" ? v : v === "" ? Infinity : String(v); };
      body.sort((a, b) => { const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * order; }).forEach(r => table.appendChild(r)); }; });
  Array.from(table.querySelectorAll("tr")).slice(1).forEach((r, i) => { r.dataset.i = i; });
  if (D.fleet) { root.appendChild(slEl("h2", {}, "The winner's fleet file (fleet.yaml)")); const pre = slEl("pre", { id: "fleet-file" }); pre.textContent = D.fleet; root.appendChild(pre); }
  slSettle();
})();
"""

_CSS = (
    "<style>pre { background: #0f172a; color: #e2e8f0; padding: 10px 12px; border-radius: 8px; overflow-x: auto; font-size: 12px; }"
    " .scroll { overflow-x: auto; } .grid1 { display: block; } td:last-child { text-align: left; max-width: 520px; }</style>"
)


def render_search_html(search: dict[str, Any], fleet_file: str | None = None) -> str:
    """The page for one search (``SearchResult.to_dict()``) and the winner's fleet file (its text)."""
    data = json.dumps({"kind": "search", "search": search, "fleet": fleet_file}, default=str, allow_nan=False)
    body = (
        _CSS + f'<script type="application/json" id="search-data">{script_safe(data)}</script><div id="report"></div>'
    )
    w = search.get("winner")
    subtitle = (f"{w['replicas_text']} × {w['candidate']['label']}, {w['cost_per_hour']:,.2f}/h for {search['peak_rps']:g} req/s"
                if w else f"nothing passed at {search['peak_rps']:g} req/s")  # fmt: skip
    return page(f"surgelab plan --search — {search['name']}", subtitle, body, [_SEARCH_JS])
