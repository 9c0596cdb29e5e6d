"""Rendering a ``CompareData``: the terminal table and the self-contained comparison page."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from surgelab.report.assets import script_safe
from surgelab.report.compare import CompareData
from surgelab.report.html import page

__all__ = ["compare_table", "render_compare_html"]

_STYLE = {"better": "green", "worse": "red", "not significant": "dim"}


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    digits = 0 if abs(value) >= 1000 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f}{(' ' + unit) if unit else ''}"


def compare_table(data: CompareData) -> Group:
    """Per candidate run: baseline and candidate side by side, the difference, its 95 % CI and the verdict."""
    base = data.runs[0]["label"]
    tables = []
    for k, run in enumerate(data.runs[1:]):
        table = Table(title=f"{run['label']} against baseline {base}", title_justify="left")
        for name in ("metric", base, run["label"], "Δ", "95% CI of Δ"):
            table.add_column(name, justify="left" if name == "metric" else "right")
        table.add_column("verdict")
        for m in data.metrics:
            d = m.diffs[k]
            rel = f" ({d['rel']:+.1%})" if d["rel"] is not None else ""
            sign = "+" if d["diff"] is not None and d["diff"] >= 0 else ""
            table.add_row(f"{m.label} ({m.unit})", _num(m.values[0]), _num(m.values[k + 1]), sign + _num(d["diff"]) + rel,
                          f"[{_num(d['ci_low'])}, {_num(d['ci_high'])}]", Text(d["verdict"], style=_STYLE[d["verdict"]]))  # fmt: skip
        tables.append(table)
    notes = [Text(n, style="red") for n in data.notes]
    method = Text(
        f"bootstrap: {data.resamples} request resamples per run, seed {data.seed}; significant = 95% CI excludes 0 "
        f"and |Δ| ≥ {data.min_effect:.0%} of baseline and, for TTFT and E2E, ≥ the client's lag P99 "
        f"({', '.join(f'{r:g}' for r in data.resolution_ms)} ms); a percentile with < 20 values beyond it (P99 of "
        "< 2,000 requests) uses order-statistic intervals and differs only when the runs barely overlap",
        style="dim",
    )
    return Group(*tables, *notes, method)


_COMPARE_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById("compare-data").textContent);
  window.SURGELAB_REPORT = D;
  const root = document.getElementById("report");
  const section = (title, cls) => { root.appendChild(slEl("h2", {}, title)); const g = slEl("div", { className: cls || "grid2" }); root.appendChild(g); return g; };
  section("Runs", "cards");
  slTable(root.lastChild, ["run", "directory", "target", "model", "measured", "valid"],
    D.runs.map((r, i) => [(i === 0 ? "baseline: " : "") + r.label, r.run_dir, r.target.url || "", r.target.model || "", r.measured, r.valid ? "yes" : '<span class="fail">NO</span>']));
  section("Metrics (Δ against the baseline, 95% bootstrap CI)", "cards");
  const head = ["metric"].concat(D.runs.map(r => r.label));
  D.runs.slice(1).forEach(r => head.push("Δ " + r.label, "95% CI", "verdict"));
  const cls = { "better": "pass", "worse": "fail", "not significant": "ns" };
  const t = slTable(root.lastChild, head, D.metrics.map(m => {
    const row = [m.label + " (" + m.unit + ")"].concat(m.values.map(v => slFmt(v)));
    m.diffs.forEach(d => row.push((d.diff > 0 ? "+" : "") + slFmt(d.diff) + (d.rel !== null ? " (" + (d.rel > 0 ? "+" : "") + slFmt(100 * d.rel, 1) + " %)" : ""),
      "[" + slFmt(d.ci_low) + ", " + slFmt(d.ci_high) + "]", '<span class="' + cls[d.verdict] + '">' + d.verdict + "</span>"));
    return row;
  }));
  t.id = "metrics-table";
  D.notes.forEach(n => root.appendChild(slEl("p", { className: "fail" }, n)));
  root.appendChild(slEl("p", { className: "note" }, "Method: " + D.method));
  const labels = D.runs.map(r => r.label);
  const cdf = section("Distributions (overlaid CDFs)", "grid3");
  [["ttft_ms", "TTFT"], ["itl_ms", "Inter-token latency"], ["e2e_ms", "E2E"]].forEach(([k, name]) =>
    slChart(cdf, "chart-cmp-" + k, name + " CDF", labels.map(l => slLine(l, D.overlays.cdfs[l][k].x, D.overlays.cdfs[l][k].p)),
      { xaxis: { title: { text: "ms" } }, yaxis: { title: { text: "fraction ≤ x" }, range: [0, 1] }, hovermode: "closest" }));
  const over = section("Over time (1 s windows)");
  const TS = D.overlays.timeseries;
  slChart(over, "chart-cmp-throughput", "Throughput (ok/s)", labels.map(l => slLine(l, TS[l].t, TS[l].throughput_per_s)), { xaxis: { title: { text: "time (s)" } } });
  slChart(over, "chart-cmp-ttft", "TTFT p99 (ms)", labels.map(l => slLine(l, TS[l].t, TS[l].ttft_p99)), { xaxis: { title: { text: "time (s)" } } });
  slChart(over, "chart-cmp-e2e", "E2E p99 (ms)", labels.map(l => slLine(l, TS[l].t, TS[l].e2e_p99)), { xaxis: { title: { text: "time (s)" } } });
  slSettle();
})();
"""


def render_compare_html(data: CompareData) -> str:
    labels = " vs ".join(r["label"] for r in data.runs)
    body = (
        f'<script type="application/json" id="compare-data">{script_safe(data.to_json())}</script>'
        '<div id="report"></div>'
    )
    return page(f"surgelab compare — {labels}", f"baseline {data.runs[0]['label']} · report v{data.version}", body,
                [_COMPARE_JS])  # fmt: skip
