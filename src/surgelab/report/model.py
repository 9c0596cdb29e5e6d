"""The one versioned result model every report renders from: ``ReportData``.

Built from a run directory (records + ``summary.json`` + ``run.json`` + the resolved
scenario, and ``telemetry.parquet`` when a scraper wrote one). Terminal, JSON and HTML
outputs are peers that only read it (``report.outputs``). Every series is small and bounded:
time series in 1 s windows, CDFs resampled to at most ``CDF_POINTS`` quantiles.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.analysis.columns import ColumnSource, Gaps, Labels, labels, plain, seconds
from surgelab.analysis.outcomes import Outcomes, e2e_per_row, outcomes_of, ttft_per_row
from surgelab.analysis.stats import min_count, sparse_percentile
from surgelab.analysis.summary import meets_slo
from surgelab.analysis.verdict import bound_text, run_verdict, sweep_verdict
from surgelab.metrics.store import return_freed_memory
from surgelab.report.extensions import extensions_for
from surgelab.report.fleet import fleet_cards
from surgelab.report.inputs import load_stored_scenario, server_latency_or_problem, telemetry_or_problem
from surgelab.scenario import Scenario

__all__ = ["REPORT_VERSION", "ReportData", "RunColumns", "build_report_data", "load_columns", "cdf", "has_slo"]

REPORT_VERSION = 1
CDF_POINTS = 400
WINDOW_S = 1.0
_STATES = ("ok", "http_error", "timeout", "connection_error", "protocol_error", "cancelled", "dropped", "lost")


@dataclass
class ReportData:
    """Everything a report shows, JSON-ready (lists and numbers only)."""

    kind: str  # "run"; sweeps and simulations add their own sections (``extensions``)
    name: str
    run_dir: str
    summary: dict[str, Any]
    run_info: dict[str, Any]
    cards: list[dict[str, Any]]
    timeseries: dict[str, Any]
    cdfs: dict[str, dict[str, list[float]]]
    breakdowns: dict[str, dict[str, dict[str, Any]]]
    telemetry: dict[str, Any] | None = None
    server_latency: dict[str, Any] | None = None  # the engine's own TTFT/E2E histograms against the client's
    slo: dict[str, Any] | None = None  # the objectives (ms) and how many measured requests missed them
    simulated: bool = False  # a simulation: charted over simulated time, no target was contacted
    extensions: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None  # the banner on top: PASS / FAIL / INVALID, exit status, first failing bound
    problems: list[str] = field(default_factory=list)  # inputs that exist but could not be read: said in red
    version: int = REPORT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@dataclass
class RunColumns:
    """The record columns reports need: seconds as floats (NaN where null), strings as codes."""

    state: Labels
    phase: Labels
    tier: Labels
    kind: Labels  # the goodput judgement (``meets_slo``) applies only the objectives that fit a kind
    warmup: np.ndarray
    intended: np.ndarray
    sent: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    output: np.ndarray
    gaps: Gaps  # every request's inter-token gaps, integer microseconds
    outcomes: Outcomes  # what counts against the run, as in the summary (``analysis.outcomes``)

    @property
    def measured(self) -> np.ndarray:
        return ~self.warmup

    def ttft(self) -> np.ndarray:
        return self.first_token - self.intended

    def e2e(self) -> np.ndarray:
        return self.end - self.intended

    def ok(self) -> np.ndarray:
        return self.state == "ok"

    def mean_itl(self) -> np.ndarray:
        return self.gaps.mean_per_request()


def load_columns(run_dir: Path | str) -> RunColumns:
    """The columns of a run directory's records, read one at a time (not the whole table)."""
    return_freed_memory()
    source = ColumnSource(Path(run_dir))
    state = labels(source, "state")
    return RunColumns(
        state=state,
        phase=labels(source, "phase"),
        tier=labels(source, "tier"),
        kind=labels(source, "kind"),
        warmup=source.column("warmup", plain).astype(bool),
        intended=source.column("intended_ns", seconds),
        sent=source.column("sent_ns", seconds),
        first_token=source.column("first_token_ns", seconds),
        end=source.column("end_ns", seconds),
        output=source.floats("output_tokens"),
        gaps=Gaps(source),
        outcomes=outcomes_of(source, state),
    )


def _r(value: float | None, digits: int = 3) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return round(float(value), digits)


def _list(values: np.ndarray, digits: int = 3) -> list[float | None]:
    return [_r(v, digits) for v in np.asarray(values, dtype=float)]


def _rounded(values: np.ndarray, digits: int) -> list[float]:
    """Finite values (a CDF's quantiles and probabilities) rounded: none to leave out."""
    return [round(float(v), digits) for v in values]


def cdf(values: np.ndarray, points: int = CDF_POINTS) -> dict[str, list[float]]:
    """An empirical CDF as (x, p): exact quantiles at ``points`` evenly spaced probabilities."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {"x": [], "p": []}
    n = min(points, values.size)
    p = np.linspace(0.0, 1.0, n)
    return {"x": _rounded(np.quantile(values, p), 3), "p": _rounded(p, 4)}


# ---------------------------------------------------------------------------------- series


def _window_index(t: np.ndarray, n: int) -> np.ndarray:
    idx = np.floor(np.nan_to_num(t, nan=-1.0) / WINDOW_S).astype(np.int64)
    return np.where((idx >= 0) & (idx < n) & np.isfinite(t), idx, -1)


def _counts(t: np.ndarray, n: int) -> np.ndarray:
    idx = _window_index(t, n)
    return np.bincount(idx[idx >= 0], minlength=n).astype(float)[:n]


def _percentiles_by_window(t: np.ndarray, values: np.ndarray, n: int, qs: tuple[int, ...]) -> dict[str, list]:
    idx = _window_index(t, n)
    keep = (idx >= 0) & np.isfinite(values)
    idx, values = idx[keep], values[keep]
    out: dict[str, Any] = {f"p{q}": [None] * n for q in qs}
    out["n"] = np.bincount(idx, minlength=n)[:n].tolist()  # the sample count beside every percentile
    out["min_n"] = {f"p{q}": min_count(q) for q in qs}  # fewer: the window's percentile is drawn grey
    if idx.size == 0:
        return out
    order = np.argsort(idx, kind="stable")
    idx, values = idx[order], values[order]
    bounds = np.searchsorted(idx, np.arange(n + 1))
    for w in range(n):
        chunk = values[bounds[w] : bounds[w + 1]]
        if chunk.size:
            for q, v in zip(qs, np.percentile(chunk, qs)):
                out[f"p{q}"][w] = _r(v * 1000.0, 2)
    return out


def _mean_in_flight(sent: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-average number of requests between send and end in each window (exact)."""
    ok = np.isfinite(sent)
    s = sent[ok]
    s.sort()
    e = end[ok]
    e[~np.isfinite(e)] = np.inf
    e.sort()
    del ok
    cs, ce = np.zeros(s.size + 1), np.zeros(e.size + 1)  # running sums with a leading 0, filled in place
    np.cumsum(s, out=cs[1:])
    np.cumsum(np.where(np.isinf(e), 0, e), out=ce[1:])

    def integral(T: float) -> float:  # ∫₀ᵀ in-flight(t) dt = Σ_{sent<T} (min(end, T) − sent)
        ns, ne = np.searchsorted(s, T), np.searchsorted(e, T)
        return ce[ne] + T * (ns - ne) - cs[ns]

    area = np.array([integral(float(T)) for T in edges])
    return np.diff(area) / np.diff(edges)


def _target_series(scenario: Scenario | None, run_info: dict[str, Any], times: np.ndarray) -> dict[str, Any] | None:
    """The planned level over time from the resolved scenario; None when it cannot be read."""
    if scenario is None:
        return None
    starts = {p["name"]: (p["start_s"], p["end_s"]) for p in run_info.get("phases", [])}
    modes: set[str] = set()
    total = np.zeros_like(times)
    for phase in scenario.phase_list:
        start, end = starts.get(phase.name, (phase.start, phase.start + phase.load.planned_duration))
        inside = (times >= start) & (times < end)
        if inside.any():
            total[inside] += phase.load.shape.level(times[inside] - start)
        modes.add(phase.load.mode)
    unit = "req/s" if modes == {"open"} else "users" if modes == {"closed"} else "mixed"
    return {"unit": unit, "level": _list(total, 3)}


def _slo_misses(c: RunColumns, scenario: Scenario | None, n: int) -> list[float | None] | None:
    """Measured requests per window (by end) that failed or missed their tier's SLO; None without an SLO.

    The same count as the simulator's ``sla_violations`` and the complement of goodput: a request
    unanswered when the grace ran out is a miss; only those cut short by the user count neither way.
    """
    if scenario is None or not has_slo(scenario):
        return None
    counted = c.measured & c.outcomes.counted
    good = meets_slo(c, c.ok() & counted, scenario)
    when = np.where(np.isfinite(c.end), c.end, c.intended)
    return _list(_counts(np.where(counted & ~good, when, np.nan), n), 0)


def has_slo(scenario: Scenario) -> bool:
    """Whether any objective is set, overall or for a tier (else nothing can miss it)."""
    slos = [scenario.slo, *(scenario.slo_of(t) for t in scenario.tiers)]
    return any(getattr(slo, k) is not None for slo in slos for k in ("ttft", "itl", "tpot", "e2e"))


def _timeseries(c: RunColumns, scenario: Scenario | None, run_info: dict[str, Any], span_s: float) -> dict[str, Any]:
    """Every per-window series over ``span_s`` seconds; each helper lets its temporaries go before the next starts."""
    n = max(int(np.ceil(span_s / WINDOW_S)), 1)
    edges = np.arange(n + 1) * WINDOW_S
    ended_ok = np.where(c.ok(), c.end, np.nan)
    # latencies as the summary counts them: successes, and the waits of requests given up on (censored)
    ended = np.where(c.outcomes.ok | c.outcomes.censored, c.end, np.nan)
    lag_windows, lag_cdf = _lag(c, n)
    return {
        "window_s": WINDOW_S,
        "span_s": round(span_s, 3),
        "t": _list(edges[:-1] + WINDOW_S / 2, 2),
        "target": _target_series(scenario, run_info, edges[:-1] + WINDOW_S / 2),
        "arrivals_per_s": _list(_counts(c.intended, n) / WINDOW_S, 2),
        "sends_per_s": _list(_counts(c.sent, n) / WINDOW_S, 2),
        "throughput_per_s": _list(_counts(ended_ok, n) / WINDOW_S, 2),
        "output_tokens_per_s": _list(_tokens(c, ended_ok, n) / WINDOW_S, 1),
        "ttft_ms": _percentiles_by_window(ended, ttft_per_row(c, c.intended), n, (50, 90, 99)),
        "e2e_ms": _percentiles_by_window(ended, e2e_per_row(c, c.intended), n, (50, 90, 99)),
        "errors": _errors(c, n),
        "slo_misses": _slo_misses(c, scenario, n),
        "lag_ms": lag_windows,
        "in_flight": _list(_mean_in_flight(c.sent, c.end, edges), 3),
        "littles_law": _list(_service_sum(c, n) / WINDOW_S, 3),
        "warmup_end_s": run_info.get("window_start_s"),
        "lag_values_ms": lag_cdf,
    }


def _tokens(c: RunColumns, ended_ok: np.ndarray, n: int) -> np.ndarray:
    """Output tokens of the successes ending in each window."""
    idx = _window_index(ended_ok, n)
    keep = idx >= 0
    return np.bincount(idx[keep], weights=np.nan_to_num(c.output)[keep], minlength=n)[:n]


def _service_sum(c: RunColumns, n: int) -> np.ndarray:
    """Summed service time (send to end) of the requests ending in each window: λ·W for Little's Law."""
    done = np.isfinite(c.sent) & np.isfinite(c.end)
    idx = _window_index(np.where(done, c.end, np.nan), n)
    keep = idx >= 0
    return np.bincount(idx[keep], weights=(c.end - c.sent)[keep], minlength=n)[:n]


def _errors(c: RunColumns, n: int) -> dict[str, list[float | None]]:
    """Requests per window ending in each failed state (dropped requests end when dropped)."""
    when = np.where(np.isfinite(c.end), c.end, c.intended)
    return {s: _list(_counts(np.where(c.state == s, when, np.nan), n), 0) for s in _STATES if s != "ok"}


def _lag(c: RunColumns, n: int) -> tuple[dict[str, list], dict[str, list[float]]]:
    """Schedule lag: its percentiles per window of intended time, and its CDF over measured requests."""
    lag = (c.sent - c.intended) * 1000.0
    return _percentiles_by_window(c.intended, lag / 1000.0, n, (50, 99)), cdf(lag[c.measured & np.isfinite(lag)])


# ---------------------------------------------------------------------------------- pieces


def _pct_card(id_: str, label: str, block: dict[str, Any], q: int) -> dict[str, Any]:
    """A percentile card with its sample count; amber, with the reason, when the tail is too thin to read."""
    count = block.get("count") or 0
    card = {"id": id_, "label": label, "value": block.get(f"p{q}"), "unit": "ms", "n": count}
    if count and sparse_percentile(count, q):
        card["status"] = "sparse"
        card["note"] = f"too few for a P{q}"
        card["detail"] = f"P{q} of {count:,} requests rests on {count * (100 - q) / 100:.1f} values beyond it (needs {min_count(q):,} requests)"
    return card


def _thresholds_card(thresholds: list[dict[str, Any]]) -> dict[str, Any]:
    """Every bound the run was held to, the defaults counted and said; "none set" only while no bound failed."""
    card = {"id": "thresholds", "label": "Thresholds", "unit": ""}
    own = [t for t in thresholds if not t.get("default")]
    if not own and all(t["passed"] for t in thresholds):
        held = "the default error bound held" if thresholds else ""
        return {**card, "value": "none set", "status": "none", "note": held, "detail": held}
    passed = sum(1 for t in thresholds if t["passed"])
    defaults = len(thresholds) - len(own)
    return {**card, "value": f"{passed}/{len(thresholds)} pass", "status": "good" if passed == len(thresholds) else "bad",
            "note": f"{defaults} default" if defaults else "", "detail": "; ".join(bound_text(t) for t in thresholds if not t["passed"])}  # fmt: skip


def _error_rate_card(summary: dict[str, Any]) -> dict[str, Any]:
    """Red when a bound on the error rate (the scenario's or the default) failed, green when one held."""
    bounds = [t for t in summary.get("thresholds", []) if t["metric"] == "error_rate"]
    card = {"id": "error_rate", "label": "Error rate", "value": summary["requests"]["error_rate"] * 100.0, "unit": "%"}
    if not bounds:
        return card
    failed = [t for t in bounds if not t["passed"]]
    return {**card, "status": "bad" if failed else "good", "note": "bound " + bounds[0]["expr"].split("<", 1)[-1].strip()
            + (" (default)" if bounds[0].get("default") else ""), "detail": "; ".join(bound_text(t) for t in bounds)}  # fmt: skip


def _cards(summary: dict[str, Any]) -> list[dict[str, Any]]:
    lat, thr = summary["latency_ms"], summary["throughput"]
    validity = summary["validity"]
    return [
        {"id": "throughput", "label": "Throughput", "value": thr["requests_per_s"], "unit": "req/s"},
        {"id": "tokens", "label": "Output tokens", "value": thr["output_tokens_per_s"], "unit": "tok/s"},
        {"id": "goodput", "label": "Goodput", "value": summary["goodput"]["requests_per_s"], "unit": "req/s"},
        _pct_card("ttft_p50", "TTFT P50", lat["ttft"], 50),
        _pct_card("ttft_p99", "TTFT P99", lat["ttft"], 99),
        _pct_card("e2e_p50", "E2E P50", lat["e2e"], 50),
        _pct_card("e2e_p99", "E2E P99", lat["e2e"], 99),
        *_decode_cards(lat),
        _requests_card(summary["requests"]),
        _error_rate_card(summary),
        _thresholds_card(summary.get("thresholds", [])),
        {"id": "validity", "label": "Validity", "value": "valid" if validity["valid"] else "INVALID",
         "unit": "", "status": "good" if validity["valid"] else "bad", "detail": "; ".join(validity["reasons"])},
    ]  # fmt: skip


def _decode_cards(lat: dict[str, Any]) -> list[dict[str, Any]]:
    """ITL and TPOT P50/P99 when the run streamed tokens (a kind without a stream has neither)."""
    cards = []
    for key, label, unit in (("itl", "ITL", "inter-token gaps"), ("tpot", "TPOT", "requests")):
        block = lat.get(key) or {}
        if not block.get("count"):
            continue
        for q in (50, 99):
            card = _pct_card(f"{key}_p{q}", f"{label} P{q}", block, q)
            card.setdefault("detail", f"over {block['count']:,} {unit}")
            cards.append(card)
    return cards


def _requests_card(req: dict[str, Any]) -> dict[str, Any]:
    """How many requests the figures rest on, and how they ended."""
    ended = [f"{req['ok']:,} ok", f"{req['failed']:,} failed"]
    ended += [f"{req[k]:,} {k}" for k in ("dropped", "cancelled", "lost") if req.get(k)]
    return {"id": "requests", "label": "Requests measured", "value": req["measured"], "unit": "", "note": " · ".join(ended),
            "detail": f"{req['scheduled']:,} scheduled, {req.get('warmup', 0):,} in the warm-up"}  # fmt: skip


def _slo_card(slo: dict[str, Any] | None) -> list[dict[str, Any]]:
    if slo is None:
        return []
    share = slo["misses"] / slo["counted"] * 100.0 if slo["counted"] else 0.0
    return [{"id": "slo", "label": f"SLO misses ({share:.1f} %)", "value": f"{slo['misses']:,} / {slo['counted']:,}", "unit": "",
             "status": "bad" if slo["misses"] else "good", "detail": slo["text"]}]  # fmt: skip


def _slo(scenario: Scenario | None, misses: list[float | None] | None, c: RunColumns) -> dict[str, Any] | None:
    """The scenario's objectives in ms (overall and per tier), said in words, and the requests that missed them."""
    if scenario is None or misses is None:
        return None

    def ms(slo: Any) -> dict[str, float]:
        set_ = [k for k in ("ttft", "itl", "tpot", "e2e") if getattr(slo, k) is not None]
        return {k: round(getattr(slo, k) * 1000.0, 3) for k in set_}

    def words(objectives: dict[str, float]) -> str:
        return ", ".join(f"{k.upper()} ≤ {v:,.0f} ms" for k, v in objectives.items()) or "none"

    overall = ms(scenario.slo)
    tiers = {name: ms(scenario.slo_of(name)) for name in scenario.tiers}
    text = words(overall) + "".join(f"; tier {t}: {words(o)}" for t, o in tiers.items() if o != overall)
    counted = int((c.measured & c.outcomes.counted).sum())
    return {"ms": overall, "tiers": tiers, "text": text, "misses": int(sum(v or 0 for v in misses)), "counted": counted}


def _span(c: RunColumns, summary: dict[str, Any], run_info: dict[str, Any]) -> float:
    """Seconds the charts cover: the run's wall time; a simulation's simulated end (its wall time is CPU time)."""
    ends = c.end[np.isfinite(c.end)]
    last = float(ends.max()) if ends.size else 0.0
    if run_info.get("simulated"):
        return max(float(run_info.get("simulated_end_s") or 0.0), last) or 1.0
    return float(run_info.get("wall_s") or summary.get("wall_s") or last or 1.0)


def _breakdowns(summary: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in ("by_phase", "by_class", "by_tier", "by_kind"):
        groups = summary.get(key) or {}
        out[key] = {
            name: {
                "measured": b["requests"]["measured"],
                "error_rate": b["requests"]["error_rate"],
                "throughput": b["throughput"]["requests_per_s"],
                "goodput": (b.get("goodput") or {}).get("requests_per_s"),
                # a kind without streaming has no first token: its cells stay empty
                "ttft_p50": (b["latency_ms"].get("ttft") or {}).get("p50"),
                "ttft_p99": (b["latency_ms"].get("ttft") or {}).get("p99"),
                "e2e_p50": b["latency_ms"]["e2e"]["p50"],
                "e2e_p99": b["latency_ms"]["e2e"]["p99"],
            }
            for name, b in groups.items()
        }
    return out


def _itl_cdf(c: RunColumns) -> dict[str, list[float]]:
    """``cdf`` of the measured successes' gaps in ms, from their counts rather than one float per gap."""
    itl = c.gaps.summary(c.ok() & c.measured, 1000.0)
    if itl.n == 0:
        return {"x": [], "p": []}
    p = np.linspace(0.0, 1.0, min(CDF_POINTS, itl.n))
    return {"x": _rounded(itl.quantiles(p), 3), "p": _rounded(p, 4)}


def _sweep_report(run_dir: Path, extensions: dict[str, Any]) -> ReportData:
    """A sweep directory: the curve and the capacity are the report (each level is a run of its own)."""
    sweep = extensions.get("sweep")
    if sweep is None:
        raise ValueError(f"{run_dir}/sweep.json cannot be read")
    points, plan, knee = sweep["points"], sweep.get("plan") or {}, sweep.get("knee") or {}
    best = max((p["throughput"] for p in points), default=None)
    unit = sweep.get("unit", "")
    thin = f"rests on a sparse tail: P99 of fewer than {sweep.get('min_count_p99', 500)} requests"
    cards = [
        {"id": "levels", "label": "Levels", "value": len(points), "unit": ""},
        {"id": "max_throughput", "label": "Max throughput", "value": best, "unit": "req/s"},
        # in achieved req/s, the unit of the curve and of its knee line; the offered level said beside it
        {"id": "knee", "label": "Knee" + (f" (offered {knee['offered']:g} {unit})" if knee else ""),
         "value": knee.get("throughput") if knee else "none", "unit": "req/s" if knee else "",
         "status": "sparse" if knee.get("sparse") else "" if knee else "none", "note": "sparse tail" if knee.get("sparse") else "",
         "detail": (thin + "; " if knee.get("sparse") else "") + knee.get("reason", "")},
        {"id": "capacity", "label": "SLA capacity", "value": plan.get("requests_per_s") if plan else "none met",
         "unit": "req/s" if plan else "", "status": "sparse" if plan.get("sparse") else "good" if plan else "bad",
         "note": "sparse tail" if plan.get("sparse") else "",
         "detail": thin if plan.get("sparse") else ""},
    ]  # fmt: skip
    summary = {"name": sweep.get("name", run_dir.name), "stop_reason": sweep.get("stop_reason", ""), "mode": "sweep"}
    return ReportData(kind="sweep", name=summary["name"], run_dir=str(run_dir), summary=summary, run_info={},
                      cards=cards, timeseries={}, cdfs={}, breakdowns={}, extensions=extensions,
                      verdict=_sweep_verdict(sweep))  # fmt: skip


def _sweep_verdict(sweep: dict[str, Any]) -> dict[str, Any]:
    plan, unit = sweep.get("plan"), sweep.get("unit", "")
    objective = ", ".join(f"P99 {k.upper()} ≤ {v:,.0f} ms" for k, v in (sweep.get("slo_ms") or {}).items()) or "the error limit"
    capacity = f"SLA capacity {plan['requests_per_s']:.4g} req/s at {plan['level']:g} {unit}" if plan else None
    invalid = [f"level {p['offered']:g}: {'; '.join(p['validity_reasons'])}" for p in sweep["points"] if not p["valid"]]
    return sweep_verdict(capacity, objective, invalid, sweep.get("stop_reason", ""))


def build_report_data(run_dir: Path | str) -> ReportData:
    """The report model of one run directory (run, or a sweep/simulation when its files exist)."""
    run_dir = Path(run_dir)
    if not (run_dir / "summary.json").exists() and (run_dir / "sweep.json").exists():
        return _sweep_report(run_dir, extensions_for(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    run_info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    problems: list[str] = []
    scenario = load_stored_scenario(run_dir, problems)
    c = load_columns(run_dir)
    span = _span(c, summary, run_info)
    timeseries = _timeseries(c, scenario, run_info, span)
    slo = _slo(scenario, timeseries["slo_misses"], c)
    verdict = run_verdict(summary, simulated=bool(run_info.get("simulated")))
    if slo and slo["misses"]:  # an objective is no threshold: a PASS beside 92 % misses must say why it passed
        verdict["notes"].append(f"SLO ({slo['text']}) missed by {slo['misses']:,} of {slo['counted']:,} measured requests: "
                                "an objective, not a threshold, so not in the exit status")  # fmt: skip
    measured_ok = c.ok() & c.measured
    return ReportData(
        kind="run",
        name=summary.get("name", run_dir.name),
        run_dir=str(run_dir),
        summary=summary,
        run_info=run_info,
        cards=_cards(summary) + _slo_card(slo) + fleet_cards(summary),
        timeseries=timeseries,
        cdfs={
            "ttft_ms": cdf(c.ttft()[measured_ok] * 1000.0),
            "itl_ms": _itl_cdf(c),
            "e2e_ms": cdf(c.e2e()[measured_ok] * 1000.0),
        },
        breakdowns=_breakdowns(summary),
        telemetry=telemetry_or_problem(run_dir, span, problems),
        server_latency=server_latency_or_problem(run_dir, {"ttft": c.ttft()[c.ok()], "e2e": c.e2e()[c.ok()]}, problems),
        slo=slo,
        simulated=bool(run_info.get("simulated")),
        extensions=extensions_for(run_dir, problems),
        verdict=verdict,
        problems=problems,
    )
