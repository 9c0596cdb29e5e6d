"""``plan.html``: a capacity plan as a page — instances (N+k), the arithmetic, the cost–availability
curve, and the HPA and alert artefacts — drawn from ``plan.json``'s content (``CapacityPlan.to_dict``).

Like the other pages it carries its model as JSON and draws from it in the browser
(``window.SURGELAB_REPORT``, ``window.SURGELAB_CHARTS``); it reads the plan as plain data, so
the report package does not depend on the planner.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from surgelab.analysis.stats import min_count, sparse_percentile
from surgelab.analysis.verdict import banner
from surgelab.report.assets import script_safe
from surgelab.report.html import page

__all__ = ["PLAN_FILE", "plan_context", "render_plan_html"]

PLAN_FILE = "plan.html"

_PLAN_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById("plan-data").textContent);
  window.SURGELAB_REPORT = D;
  const P = D.plan, F = P.fleet, I = F.inputs, root = document.getElementById("report");
  const esc = t => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const section = (title, cls) => { root.appendChild(slEl("h2", {}, title)); const g = slEl("div", { className: cls || "grid2" }); root.appendChild(g); return g; };
  slVerdict(root, D.verdict);
  const C = D.context || {}, cur = C.currency ? C.currency + " " : "";
  (C.warnings || []).forEach(w => root.appendChild(slEl("p", { className: "warn plan-warning" }, "Warning: " + esc(w))));
  if (C.sweep) root.appendChild(slEl("p", { id: "sweep-link", className: "note" }, "From the sweep <a href=\"" + esc(C.sweep.link) + "\">" + esc(C.sweep.name) + "</a>"
    + " (level " + slFmt(C.sweep.level) + " " + esc(C.sweep.unit) + ")" + (C.sweep.exists ? "" : " — its page is not written yet: <code>surgelab report " + esc(C.sweep.dir) + "</code>")));
  const cards = section("Plan", "cards");
  const money = v => v === null || v === undefined ? "–" : slFmt(v, 0);
  [["instances", "Instances (N+" + I.spares + ")", F.total, ""], ["base", "N for the peak", F.base, ""], ["gpus", "GPUs", F.gpus, ""],
   ["capacity", "SLA capacity / instance", P.capacity, "req/s"], ["target", "Target / instance", F.per_instance_target, "req/s"],
   ["peak", "Forecast peak", I.peak, "req/s"], ["load", "Load at peak", 100 * F.utilisation_at_peak, "%"],
   ["cost", "Cost / month", F.cost_per_month === null ? "–" : money(F.cost_per_month), F.cost_per_month === null ? "" : C.currency || "(--gpu-hour-cost's currency)"]].forEach(([id, label, v, unit]) => {
    const e = slEl("div", { className: "card", id: "card-" + id }, '<div class="label">' + label + '</div><div class="value">' + slFmt(v) + '<span class="unit">' + unit + "</span></div>");
    cards.appendChild(e);
  });
  root.appendChild(slEl("p", { className: "note" }, "SLA capacity from " + esc(P.capacity_source)));
  if (C.model_error) root.appendChild(slEl("p", { id: "model-error", className: "warn" }, "Engine model's error bar: " + esc(C.model_error)
    + " — a simulated capacity, sized at the model's slow end"));
  if (C.assumptions) { root.appendChild(slEl("h2", {}, "Assumptions")); const ab = slEl("div"); root.appendChild(ab);
    const at = slTable(ab, ["assumption", "value", ""], C.assumptions.map(a => [esc(a[0]), esc(a[1]), '<span class="note">' + esc(a[2]) + "</span>"]));
    at.id = "assumptions"; at.querySelectorAll("tr").forEach(r => { if (r.cells[2]) r.cells[2].className = "text"; }); }
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
  slTable(tb, ["instances", "GPUs", "cost/month" + (C.currency ? " (" + esc(C.currency) + ")" : ""), "load at peak", "P(SLA holds)", "P(SLA holds, 1 down)", ""], rows.map(r => [r.instances, r.gpus, money(r.cost_per_month),
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


def render_plan_html(
    plan: dict[str, Any], artefacts: dict[str, str], title: str = "capacity plan", context: dict[str, Any] | None = None
) -> str:
    """The page for one plan (``CapacityPlan.to_dict()``), its artefact files (name → text) and ``plan_context``."""
    data = json.dumps({"kind": "plan", "plan": plan, "artefacts": artefacts, "verdict": _verdict(plan), "context": context or {}},
                      default=str, allow_nan=False)  # fmt: skip
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


def plan_context(
    sweep: Any, sweep_path: Path | None, capacity: dict[str, Any] | None, out: Path, inputs: dict[str, Any],
    defaults: dict[str, bool], currency: str = "", model_error: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What the plan rests on: the sweep's warnings at the level it sized on, the engine model's error
    bar, the assumptions (defaults said), the currency, and a link back to the sweep's page.

    ``sweep`` is a ``SweepResult`` (or None with ``--capacity``), ``capacity`` its SLA capacity row;
    ``defaults`` names the inputs left at their default (``peak_cv``, ``safety``).
    """
    warnings: list[str] = []
    link = None
    if sweep is not None and capacity is not None and sweep_path is not None:
        row = next((r for r in sweep.levels if r.index == capacity.get("index")), None)
        level = f"{capacity['level']:g} {sweep.unit}"
        if row is not None and sparse_percentile(row.measured, 99):
            warnings.append(f"sized on a sparse tail: the sweep's level {level} holds {row.measured:,} requests, so its P99 "
                            f"rests on fewer than {min_count(99):,} (hold the sweep's levels longer)")  # fmt: skip
        if not any(not e.startswith("error") for e in capacity.get("slo") or []):
            ttft = row.latency("ttft", "p99") if row is not None else None
            warnings.append(f"sized on the error limit alone (no latency objective): at level {level} TTFT P99 was "
                            + (f"{ttft:,.0f} ms" if ttft is not None else "not measured") + "; give --slo to size on latency")
        if row is not None and not row.valid:
            warnings.append(f"the level {level} is INVALID: {'; '.join(row.validity_reasons)}")
        directory = sweep_path if sweep_path.is_dir() else sweep_path.parent
        page_path = directory / "report.html"
        link = {"name": sweep.name, "dir": str(directory), "link": os.path.relpath(page_path, out), "exists": page_path.exists(),
                "level": capacity["level"], "unit": sweep.unit}  # fmt: skip

    def said(key: str) -> str:
        return " (default)" if defaults.get(key) else ""

    cost = inputs.get("gpu_hour_cost")
    assumptions = [
        ["peak variation", f"CV {inputs['peak_cv']:g}{said('peak_cv')}", "the actual peak, lognormal around the forecast: the availability table"],
        ["safety", f"{inputs['safety']:g}{said('safety')}", f"the share of the SLA capacity used at the peak ({1 - inputs['safety']:.0%} headroom)"],
        ["spares", f"N+{inputs['spares']}", "instances that may be down at the peak"],
        ["GPUs per instance", f"{inputs['gpus_per_instance']}", ""],
        ["GPU-hour cost", "not given" if cost is None else f"{cost:g} {currency or '(currency of --gpu-hour-cost)'} per GPU-hour",
         f"a month is {inputs.get('hours_per_month', 730):g} h"],
    ]  # fmt: skip
    return {"warnings": warnings, "sweep": link, "model_error": model_error, "assumptions": assumptions, "currency": currency}
