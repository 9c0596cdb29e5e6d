"""Rendering a ``CompareData``: the terminal table and the self-contained comparison page."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from surgelab.report.assets import script_safe
from surgelab.report.compare import CompareData
from surgelab.report.html import page
from surgelab.tablefit import fit_table, natural_width

__all__ = ["compare_table", "render_compare_html"]

_STYLE = {"better": "green", "worse": "red", "not significant": "dim", "load differed": "yellow"}


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    digits = 0 if abs(value) >= 1000 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f}{(' ' + unit) if unit else ''}"


_SHORT = {"the 95% interval includes 0": "CI∋0", "no data": "no data"}
_NAMES = {"throughput": "req/s", "output_tokens": "output tok/s", "error_rate": "errors %", "slo_violations": "SLO misses",
          "goodput": "goodput req/s", "cost": "cost"}  # fmt: skip


def _interval(d: dict) -> str:
    """The 95 % interval of Δ; ``*`` where a sparse tail's interval was widened to include 0 (the tails overlap)."""
    if d.get("exact"):
        return "exact"
    return f"[{_num(d['ci_low'])}, {_num(d['ci_high'])}]" + ("*" if d.get("ci_widened") else "")


def _why(reason: str) -> str:
    """The reason for "not significant", in a word for the terminal's 80 columns (the page says it in full)."""
    if reason.startswith("sparse tail"):
        return "tail"
    if reason.startswith("|Δ| below the client"):
        return "<lag"
    if reason.startswith("|Δ| below"):
        return "<" + reason.split("below ", 1)[1].split(" ", 1)[0]
    return _SHORT.get(reason, reason)


def _compare_rows(data: CompareData, k: int, names: tuple[str, str]) -> Table:
    """Candidate ``k``'s table, its two value columns headed ``names``."""
    run = data.runs[k + 1]
    table = Table(title=f"{run['label']} against baseline {data.runs[0]['label']}", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, padding=(0, 1))  # fmt: skip
    table.add_column("metric", no_wrap=True)
    for name in (*names, "Δ", "95% CI of Δ"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for m in data.metrics:
        d = m.diffs[k]
        rel = f" ({d['rel']:+.0%})" if d["rel"] is not None else ""
        sign = "+" if d["diff"] is not None and d["diff"] >= 0 else ""
        verdict = d["verdict"] if d["verdict"] != "not significant" else "n.s. " + _why(d.get("reason", ""))
        table.add_row(_NAMES.get(m.id, f"{m.label} {m.unit}"), _num(m.values[0]), _num(m.values[k + 1]), sign + _num(d["diff"]) + rel,
                      _interval(d), Text(verdict, style=_STYLE[d["verdict"]]))  # fmt: skip
    return table


def compare_table(data: CompareData, width: int | None = None) -> Group:
    """Per candidate run: baseline and candidate side by side, the difference, its 95 % CI and the verdict.

    Fits 80 columns: light borders, units in the metric's name, the relative difference as a
    whole percentage, and "n.s." with its reason in a word (the reasons in full are in the page).
    At ``width`` columns, long run names become "baseline" and "candidate" (the title names them),
    then the interval and the difference are left out whole rather than cut short.
    """
    base = data.runs[0]["label"]
    tables = []
    for k, run in enumerate(data.runs[1:]):
        table = _compare_rows(data, k, (base, run["label"]))
        if width is not None and natural_width(table) > width:
            table = _compare_rows(data, k, ("baseline", "candidate"))
        tables.append(fit_table(table, width, ("95% CI of Δ", "Δ")))
        if run.get("load_differs"):
            tables.append(Text(f"{run['label']}: {run['load_differs']} — no metric is called better or worse", style="yellow"))
    notes = [Text(n, style="red") for n in data.notes]
    method = Text(
        f"n.s. = not significant: CI∋0 its 95% CI includes 0, <5% smaller than the minimum effect, <lag smaller "
        f"than the client's timing resolution, tail a sparse tail whose runs overlap. Method: bootstrap, {data.resamples} request resamples per run, seed {data.seed}; "
        f"significant = 95% CI excludes 0 and |Δ| ≥ {data.min_effect:.0%} of baseline and, for TTFT and E2E, ≥ "
        f"the client's lag P99 ({', '.join(f'{r:g}' for r in data.resolution_ms)} ms); a percentile with < 20 "
        "values beyond it (P99 of < 2,000 requests) uses order-statistic intervals and differs only when the runs "
        "barely overlap (* its interval widened to include 0: the tails overlap); runs whose offered load differed are "
        "called neither better nor worse",
        style="dim",
    )
    return Group(*tables, *notes, method)


_COMPARE_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById("compare-data").textContent);
  window.SURGELAB_REPORT = D;
  const root = document.getElementById("report");
  const esc = t => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const section = (title, cls) => { root.appendChild(slEl("h2", {}, title)); const g = slEl("div", { className: cls || "grid2" }); root.appendChild(g); return g; };
  const pct = d => d.rel === null ? "" : " (" + (d.rel > 0 ? "+" : "") + slFmt(100 * d.rel, 0) + " %)";
  // each run's own verdict, then per candidate what got better, what got worse
  const banners = slEl("div", { id: "run-verdicts" }); root.appendChild(banners);
  D.runs.forEach((r, i) => { slVerdict(banners, r.verdict, (i === 0 ? "baseline " : "") + r.label); slProblems(banners, (r.problems || []).map(p => r.label + ": " + p)); });
  const top = slEl("div", { id: "overall" }); root.appendChild(top);
  D.runs.slice(1).forEach((r, k) => {
    if (r.load_differs) {  // three times the load is not three times better: no verdict on the system
      top.appendChild(slEl("p", { className: "verdict warn" }, "<b>" + esc(r.label) + " against " + esc(D.runs[0].label) + ": LOAD DIFFERED</b> — "
        + esc(r.load_differs) + ": no metric is called better or worse; the differences below are the load's as much as the system's"));
      return;
    }
    const better = D.metrics.filter(m => m.diffs[k].verdict === "better"), worse = D.metrics.filter(m => m.diffs[k].verdict === "worse");
    const cls = worse.length && better.length ? "warn" : worse.length ? "fail" : better.length ? "pass" : "ns";
    const list = ms => ms.map(m => m.label + pct(m.diffs[k])).join(", ");
    const word = worse.length && better.length ? "mixed" : worse.length ? "WORSE" : better.length ? "BETTER" : "no significant difference";
    top.appendChild(slEl("p", { className: "verdict " + cls }, "<b>" + esc(r.label) + " against " + esc(D.runs[0].label) + ": " + word + "</b>"
      + (better.length ? " — better: " + esc(list(better)) : "") + (worse.length ? " — worse: " + esc(list(worse)) : "")
      + " · " + (D.metrics.length - better.length - worse.length) + " of " + D.metrics.length + " metrics not significant"));
  });
  D.notes.forEach(n => top.appendChild(slEl("p", { className: "fail" }, esc(n))));
  if (D.settings && D.settings.length) {
    root.appendChild(slEl("h2", {}, "What differs between the runs (resolved scenarios)"));
    const box = slEl("div"); root.appendChild(box);
    slTable(box, ["setting"].concat(D.runs.map(r => esc(r.label))), D.settings.map(s => ["<code>" + esc(s.key) + "</code>"].concat(s.values.map(v => v === null ? "–" : esc(v))))).id = "settings-table";
  }
  root.appendChild(slEl("h2", {}, "Runs"));
  const runs = slEl("div"); root.appendChild(runs);
  slTable(runs, ["run", "directory", "target", "model", "offered load", "measured", "valid"],
    D.runs.map((r, i) => [(i === 0 ? "baseline: " : "") + esc(r.label), esc(r.run_dir), esc(r.target.url || ""), esc(r.target.model || ""),
      (r.offered.value === null ? "–" : slFmt(r.offered.value)) + " " + r.offered.unit + (r.load_differs ? ' <span class="warn">≠</span>' : ""), r.measured, r.valid ? "yes" : '<span class="fail">NO</span>']));
  root.appendChild(slEl("h2", {}, "Metrics (Δ against the baseline, 95% bootstrap CI)"));
  const wrap = slEl("div"); root.appendChild(wrap);
  const head = ["metric"].concat(D.runs.map(r => esc(r.label)));
  D.runs.slice(1).forEach(r => head.push("Δ " + esc(r.label), "95% CI", "verdict"));
  const cls = { "better": "pass", "worse": "fail", "not significant": "ns", "load differed": "warn" };
  const ci = d => d.exact ? "exact<div class=\"why\">a simulation's cost: no resampling</div>"
    : "[" + slFmt(d.ci_low) + ", " + slFmt(d.ci_high) + "]" + (d.sparse_tail ? '<div class="why">order-statistic interval: a sparse tail'
      + (d.ci_widened ? "; widened to include 0 because the runs' tails overlap" : "") + "</div>" : "");
  const t = slTable(wrap, head, D.metrics.map(m => {
    const row = [m.label + " (" + m.unit + ")"].concat(m.values.map(v => slFmt(v)));
    m.diffs.forEach(d => row.push((d.diff > 0 ? "+" : "") + slFmt(d.diff) + pct(d),
      ci(d),
      '<span class="' + cls[d.verdict] + '">' + d.verdict + "</span>" + (d.reason ? '<div class="why">' + esc(d.reason) + "</div>" : "")));
    return row;
  }));
  t.id = "metrics-table"; t.className = "wide";
  // the method, as prose: ``code``, **strong** and *emphasis* rendered, not printed as markup
  const prose = esc(D.method).replace(/``([^`]+)``/g, "<code>$1</code>").replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>").replace(/\*([^*]+)\*/g, "<em>$1</em>");
  root.appendChild(slEl("p", { className: "note", id: "method" }, "<b>Method.</b> " + prose));
  // each difference with its interval, relative to the baseline's value: one chart per candidate, one row a metric
  const forest = section("Each difference with its 95 % interval (relative to the baseline)");
  D.runs.slice(1).forEach((r, k) => {
    const rows = D.metrics.filter(m => m.values[0] && m.diffs[k].diff !== null && m.diffs[k].ci_low !== null);
    const base = m => Math.abs(m.values[0]), d = m => m.diffs[k];
    const colour = { "better": "#15803d", "worse": "#b91c1c", "not significant": "#6b7280", "load differed": "#b45309" };
    slChart(forest, "chart-cmp-diff-" + (k + 1), esc(r.label) + " against " + esc(D.runs[0].label) + (r.load_differs ? " (load differed)" : ""), [{
      name: "Δ and its 95 % interval", type: "scatter", mode: "markers",
      x: rows.map(m => 100 * d(m).diff / base(m)), y: rows.map(m => m.label),
      error_x: { type: "data", symmetric: false, array: rows.map(m => 100 * (d(m).ci_high - d(m).diff) / base(m)),
                 arrayminus: rows.map(m => 100 * (d(m).diff - d(m).ci_low) / base(m)), thickness: 2 },
      marker: { size: 9, color: rows.map(m => colour[d(m).verdict] || "#6b7280") },
      text: rows.map(m => d(m).verdict), hovertemplate: "%{y}: %{x:.1f} % (%{text})<extra></extra>",
    }], { xaxis: { title: { text: "difference against the baseline (%)" }, zeroline: true, zerolinewidth: 2 },
          yaxis: { title: { text: "metric", standoff: 12 }, automargin: true, autorange: "reversed" }, height: 80 + 28 * rows.length,
          margin: { l: 20, r: 20, t: 40, b: 60 }, showlegend: false, hovermode: "closest" });
  });
  const labels = D.runs.map(r => r.label);
  const cdf = section("Distributions (overlaid CDFs)", "grid3");
  [["ttft_ms", "TTFT"], ["itl_ms", "Inter-token latency"], ["e2e_ms", "E2E"]].forEach(([k, name]) =>
    slChart(cdf, "chart-cmp-" + k, name + " CDF", labels.map(l => slLine(l, D.overlays.cdfs[l][k].x, D.overlays.cdfs[l][k].p)),
      { xaxis: { title: { text: name + " (ms)" } }, yaxis: { title: { text: "fraction ≤ x" }, range: [0, 1] }, hovermode: "closest" }));
  const over = section("Over time (1 s windows)");
  const TS = D.overlays.timeseries, xt = { title: { text: "time (s)" } };
  slChart(over, "chart-cmp-throughput", "Throughput (ok/s)", labels.map(l => slLine(l, TS[l].t, TS[l].throughput_per_s)), { xaxis: xt, yaxis: { title: { text: "requests per second" } } });
  const p99 = k => labels.flatMap((l, i) => slSparse(l, TS[l].t, TS[l][k + "_p99"], TS[l][k + "_n"], TS[l].min_n, SL_COLORS[i % SL_COLORS.length]));
  slChart(over, "chart-cmp-ttft", "TTFT p99 (ms; grey: too few requests in the window)", p99("ttft"), { xaxis: xt, yaxis: { title: { text: "TTFT p99 (ms)" } } });
  slChart(over, "chart-cmp-e2e", "E2E p99 (ms; grey: too few requests in the window)", p99("e2e"), { xaxis: xt, yaxis: { title: { text: "E2E p99 (ms)" } } });
  slSettle();
})();
"""

_CSS = (
    "<style>table.wide { width: 100%; } .why { font-size: 11px; color: var(--muted); font-weight: 400; }"
    " p.verdict { font-size: 15px; padding: 8px 12px; border-radius: 6px; background: #fff; border: 1px solid var(--line); }"
    " code { background: #f1f5f9; padding: 0 3px; border-radius: 3px; }</style>"
)


def render_compare_html(data: CompareData) -> str:
    labels = " vs ".join(r["label"] for r in data.runs)
    body = (
        _CSS + f'<script type="application/json" id="compare-data">{script_safe(data.to_json())}</script>'
        '<div id="report"></div>'
    )
    return page(f"surgelab compare — {labels}", f"baseline {data.runs[0]['label']} · report v{data.version}", body,
                [_COMPARE_JS])  # fmt: skip
