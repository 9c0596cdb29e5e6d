"""``plan.html``: a capacity plan as a page — instances (N+k), the arithmetic, the cost–availability
curve, and the HPA and alert artefacts — drawn from ``plan.json``'s content (``CapacityPlan.to_dict``).

Like the other pages it carries its model as JSON and draws from it in the browser
(``window.SURGELAB_REPORT``, ``window.SURGELAB_CHARTS``); it reads the plan as plain data, so
the report package does not depend on the planner.
"""

from __future__ import annotations

import json
from typing import Any

from surgelab.analysis.verdict import banner
from surgelab.report.assets import script_safe
from surgelab.report.html import page

__all__ = ["PLAN_FILE", "render_plan_html"]

PLAN_FILE = "plan.html"

_PLAN_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById("plan-data").textContent);
  window.SURGELAB_REPORT = D;
  const P = D.plan, F = P.fleet, I = F.inputs, root = document.getElementById("report");
  const esc = t => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const section = (title, cls) => { root.appendChild(slEl("h2", {}, title)); const g = slEl("div", { className: cls || "grid2" }); root.appendChild(g); return g; };
  slVerdict(root, D.verdict);
  const cards = section("Plan", "cards");
  const money = v => v === null || v === undefined ? "–" : slFmt(v, 0);
  [["instances", "Instances (N+" + I.spares + ")", F.total, ""], ["base", "N for the peak", F.base, ""], ["gpus", "GPUs", F.gpus, ""],
   ["capacity", "SLA capacity / instance", P.capacity, "req/s"], ["target", "Target / instance", F.per_instance_target, "req/s"],
   ["peak", "Forecast peak", I.peak, "req/s"], ["load", "Load at peak", 100 * F.utilisation_at_peak, "%"],
   ["cost", "Cost / month", F.cost_per_month === null ? "–" : money(F.cost_per_month), ""]].forEach(([id, label, v, unit]) => {
    const e = slEl("div", { className: "card", id: "card-" + id }, '<div class="label">' + label + '</div><div class="value">' + slFmt(v) + '<span class="unit">' + unit + "</span></div>");
    cards.appendChild(e);
  });
  root.appendChild(slEl("p", { className: "note" }, "SLA capacity from " + esc(P.capacity_source)));
  const ar = slEl("pre", { id: "arithmetic" }); ar.textContent = F.arithmetic.join("\n"); root.appendChild(ar);
  const rows = F.table, n = rows.map(r => r.instances);
  const curve = section("Cost against availability (actual peak lognormal, mean " + slFmt(I.peak) + " req/s, CV " + I.peak_cv + ")");
  const mark = [F.base, F.total].filter((v, i, a) => a.indexOf(v) === i).map(v => ({ type: "line", yref: "paper", y0: 0, y1: 1, x0: v, x1: v, line: { dash: "dot", color: v === F.total ? "#15803d" : "#111" } }));
  const ann = [{ yref: "paper", y: 1, x: F.total, text: "planned " + F.total, showarrow: false, yanchor: "bottom" }];
  const tr = [slLine("P(SLA holds)", n, rows.map(r => r.p_sla), { mode: "lines+markers" }), slLine("P(SLA holds, one instance down)", n, rows.map(r => r.p_sla_one_down), { mode: "lines+markers", line: { dash: "dash" } })];
  const hasCost = rows.some(r => r.cost_per_month !== null);
  if (hasCost) tr.unshift({ name: "cost per month", x: n, y: rows.map(r => r.cost_per_month), type: "bar", yaxis: "y2", marker: { color: "#cbd5e1" } });
  slChart(curve, "chart-plan-curve", "Probability the SLA holds at the peak, by fleet size", tr,
    Object.assign({ xaxis: { title: { text: "instances" }, dtick: 1 }, yaxis: { title: { text: "probability" }, range: [0, 1.05] }, shapes: mark, annotations: ann, hovermode: "x unified", margin: { l: 60, r: 70, t: 40, b: 80 } },
      hasCost ? { yaxis2: { overlaying: "y", side: "right", title: { text: "cost per month" }, showgrid: false, rangemode: "tozero" } } : {}));
  slChart(curve, "chart-plan-load", "Load at the peak, by fleet size", [slLine("share of the fleet's SLA capacity", n, rows.map(r => r.utilisation_at_peak), { mode: "lines+markers" })],
    { xaxis: { title: { text: "instances" }, dtick: 1 }, yaxis: { title: { text: "load at peak (fraction)" }, rangemode: "tozero" }, shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: I.safety, y1: I.safety, line: { dash: "dash", color: "#b91c1c" } }],
      annotations: [{ xref: "paper", x: 1, y: I.safety, text: "safety " + I.safety, showarrow: false, yanchor: "bottom", xanchor: "right" }], hovermode: "closest" });
  const tb = slEl("div"); root.appendChild(tb);
  slTable(tb, ["instances", "GPUs", "cost/month", "load at peak", "P(SLA holds)", "P(SLA holds, 1 down)", ""], rows.map(r => [r.instances, r.gpus, money(r.cost_per_month),
    slFmt(100 * r.utilisation_at_peak, 0) + " %", slFmt(r.p_sla, 4), slFmt(r.p_sla_one_down, 4), r.instances === F.total ? "planned" : r.instances === F.base ? "N" : ""])).id = "plan-table";
  if (P.knee && P.knee.reason) root.appendChild(slEl("p", { className: "note" }, "Knee: " + esc(P.knee.reason)));
  const art = section("Artefacts", "grid2");
  Object.keys(D.artefacts).forEach(name => { const box = slEl("div", { className: "artefact" }); box.appendChild(slEl("h3", {}, esc(name)));
    const pre = slEl("pre"); pre.textContent = D.artefacts[name]; box.appendChild(pre); art.appendChild(box); });
  slSettle();
})();
"""

_CSS = (
    "<style>pre { background: #0f172a; color: #e2e8f0; padding: 10px 12px; border-radius: 8px; overflow-x: auto;"
    " font-size: 12px; } #arithmetic { background: #fff; color: var(--fg); border: 1px solid var(--line); }"
    " .artefact h3 { font-size: 14px; margin: 4px 0; }</style>"
)


def render_plan_html(plan: dict[str, Any], artefacts: dict[str, str], title: str = "capacity plan") -> str:
    """The page for one plan (``CapacityPlan.to_dict()``) and its artefact files (name → text)."""
    data = json.dumps({"kind": "plan", "plan": plan, "artefacts": artefacts, "verdict": _verdict(plan)}, default=str, allow_nan=False)
    body = _CSS + f'<script type="application/json" id="plan-data">{script_safe(data)}</script><div id="report"></div>'
    fleet = plan["fleet"]
    subtitle = f"{fleet['total']} instances for a peak of {fleet['inputs']['peak']:.4g} req/s · {plan['capacity_source']}"
    return page(f"surgelab plan — {title}", subtitle, body, [_PLAN_JS])


def _verdict(plan: dict[str, Any]) -> dict[str, Any]:
    """PASS while the planned fleet runs the peak within its safety margin; ``surgelab plan`` exits 0 with a plan."""
    fleet = plan["fleet"]
    load, safety = fleet["utilisation_at_peak"], fleet["inputs"]["safety"]
    said = f"load at the peak {load:.1%} of the fleet's SLA capacity (safety {safety:g})"
    failures = [] if load <= safety + 1e-9 else [said]
    return banner("PASS" if not failures else "FAIL", 0, "surgelab plan", "planned", failures,
                  headline=f"{fleet['total']} instances for a peak of {fleet['inputs']['peak']:.4g} req/s; {said}")
