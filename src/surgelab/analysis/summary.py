"""Build ``summary.json`` from a run's records: the contract documented in docs/summary.md.

It reads only the records, the scenario and the run's start/stop facts, so the same code
summarises a live run, a crashed run's leftovers and (later) a simulated run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from surgelab import __version__
from surgelab.analysis.agents import agents_block, tools_block
from surgelab.analysis.columns import ColumnSource, Gaps, Labels, labels, plain, seconds
from surgelab.analysis.errors import top_errors
from surgelab.analysis.failover import failover_block, failover_threshold, live_switch_overs
from surgelab.analysis.kinds import by_kind
from surgelab.analysis.network import network_block, rate_limit_block
from surgelab.analysis.outcomes import censored_distribution, e2e_values, outcomes_of, ttft_values
from surgelab.analysis.slo import goodput, kinds_of, meets_slo, slo_ms
from surgelab.analysis.start_burst import start_burst
from surgelab.analysis.stats import distribution, gap_distribution
from surgelab.analysis.streams import buffered_streams, buffering_warnings
from surgelab.analysis.token_counts import uncounted_tokens_warning
from surgelab.analysis.trend import Trend, request_trends
from surgelab.analysis.verdict import headline
from surgelab.analysis.window import Window
from surgelab.conditions import Threshold
from surgelab.kinds import KINDS
from surgelab.load.ramp_check import ramp_warnings
from surgelab.metrics.record import FAILED_STATES, State
from surgelab.redact import redact_url
from surgelab.scenario.model import Scenario
from surgelab.workload.context import context_warnings

__all__ = ["RunInfo", "RecordColumns", "summarize", "meets_slo", "SUMMARY_VERSION"]

SUMMARY_VERSION = 2  # 2: every request that did not succeed counts against the run (analysis.outcomes)


@dataclass(frozen=True)
class Planned:
    """The run's planned times: ``run.json``'s, or what the scenario says (phase jitter not included)."""

    duration_s: float
    window_start_s: float  # the earliest end of a phase's warm-up
    phase_windows: dict[str, tuple[float, float]]  # per phase: (warm-up end, planned end)

    def phase_window(self, name: str, run: Window) -> Window:
        """A phase's own measurement window, cut where the run stopped."""
        start, end = self.phase_windows.get(name, (run.start, run.end))
        return Window(start, max(min(end, run.end), start))


@dataclass(frozen=True)
class RunInfo:
    """Facts about the run that the records alone do not hold (from ``run.json``)."""

    started_at: str | None = None
    stop_reason: str = "unknown"
    stopped_at_s: float | None = None  # end of the measurement window; None after a crash
    wall_s: float | None = None
    planned_duration_s: float | None = None
    window_start_s: float | None = None  # the earliest end of a phase's warm-up
    phase_windows: dict[str, tuple[float, float]] | None = None  # per phase: (warm-up end, planned end)
    worker_losses: tuple[str, ...] = ()  # what each worker that died took with it, in words
    client_crashes: str | None = None  # request tasks that raised inside surgelab, in words (run.json client_crashes)
    routing: dict[str, Any] | None = None  # the live router's report (run.json ``routing``)
    failover: dict[str, Any] | None = None  # a simulation's switch-overs and their bound: {"switch_overs", "bound_s"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        return cls(
            started_at=data.get("started_at"),
            stop_reason=data.get("stop_reason", "unknown (no clean stop recorded)"),
            stopped_at_s=data.get("stopped_at_s"),
            wall_s=data.get("wall_s"),
            planned_duration_s=data.get("planned_duration_s"),
            window_start_s=data.get("window_start_s"),
            phase_windows={p["name"]: (p["warmup_end_s"], p["end_s"]) for p in data["phases"]} if "phases" in data else None,
            worker_losses=tuple(loss["reason"] for loss in data.get("worker_losses", ())),
            client_crashes=_crashes_text(data.get("client_crashes")),
            routing=data.get("routing"),
            failover=data.get("failover"),
        )

    def planned(self, scenario: Scenario) -> Planned:
        duration = self.planned_duration_s if self.planned_duration_s is not None else scenario.planned_duration
        start = self.window_start_s
        if start is None:
            start = min(p.start + p.load.warmup for p in scenario.phase_list)
        phases = self.phase_windows
        if phases is None:
            phases = {p.name: (p.start + p.load.warmup, p.start + p.load.planned_duration) for p in scenario.phase_list}
        return Planned(duration, start, phases)


class RecordColumns:
    """The record columns the summary needs, compact (see ``analysis.columns``).

    Built from a table, or from a run directory one Parquet column at a time; columns only
    some kinds need (units, flow steps) are read when asked for.
    """

    def __init__(self, records: pa.Table | Path | str) -> None:
        source = ColumnSource(records)
        self.source = source
        self.gaps = Gaps(source)  # only the gap counts: the gaps are read again when walked
        self._last_itl: tuple[np.ndarray, float, dict[str, Any]] | None = None
        self.state = labels(source, "state")
        self.phase = labels(source, "phase")
        self.request_class = labels(source, "request_class")
        self.tier = labels(source, "tier")
        self.outcomes = outcomes_of(source, self.state)  # what counts against the run (analysis.outcomes)
        self.first_token_rows = np.ones(len(self.state), dtype=bool)  # kinds with a first token (set by summarize)
        self.usage_source = labels(source, "usage_source")
        self.target = labels(source, "target")
        self.kind = labels(source, "kind")
        self.warmup = source.column("warmup", plain).astype(bool)
        self.intended = source.column("intended_ns", seconds)
        self.sent = source.column("sent_ns", seconds)
        self.first_token = source.column("first_token_ns", seconds)
        self.end = source.column("end_ns", seconds)
        self.prompt = source.floats("prompt_tokens")
        self.intended_prompt = source.floats("intended_prompt_tokens")
        self.output = source.floats("output_tokens")
        self.attempts = _attempts(
            source.numpy("http_status", plain), source.numpy("attempts", plain), source.numpy("resends", plain), source.rows
        )

    def itl_of(self, mask: np.ndarray) -> np.ndarray:
        return self.gaps.values(mask)

    def itl_distribution(self, mask: np.ndarray, scale: float = 1000) -> dict[str, Any]:
        """``distribution(self.itl_of(mask), scale)``, computed without holding the gaps as floats.

        The last result is kept: a run of one phase, class or tier asks for the same rows in
        every breakdown, and walking millions of gaps again would give the same figures.
        """
        last = self._last_itl
        if last is not None and last[1] == scale and np.array_equal(last[0], mask):
            return dict(last[2])
        result = gap_distribution(self.gaps.summary(mask, scale))
        self._last_itl = (mask.copy(), scale, result)
        return dict(result)

    def mean_itl(self) -> np.ndarray:
        return self.gaps.mean_per_request()


def summarize(records: pa.Table | Path | str, scenario: Scenario, info: RunInfo) -> dict[str, Any]:
    """The summary of a table of records, or of a run directory's ``records.parquet`` read column by column."""
    planned = info.planned(scenario)
    c = RecordColumns(records)
    c.first_token_rows = kinds_of(c, scenario).isin(KINDS.having("first_token"))
    warmup_only = bool(c.warmup.size) and bool(c.warmup.all())
    if warmup_only:  # stopped before the warm-up ended: the warm-up is all there is to report
        c.warmup = np.zeros_like(c.warmup)
    window_start = 0.0 if warmup_only else planned.window_start_s
    window_end = info.stopped_at_s
    if window_end is None:  # crashed run: the records tell how far it got
        finite = c.end[~np.isnan(c.end)]
        window_end = min(planned.duration_s, float(finite.max()) if finite.size else planned.duration_s)
    window_end = max(window_end, window_start)
    window = Window(window_start, window_end)

    everything = np.ones(len(c.state), dtype=bool)
    overall = _block(c, everything, window, scenario)
    by_state = {s.value: int(np.sum(c.state == s.value)) for s in State}
    lag_stats = _lag(c, ~c.warmup)
    dropped = c.state == State.DROPPED.value  # at max_in_flight (the client's limit), or left with a busy user
    at_limit = int((dropped & labels(c.source, "error").startswith("max_in_flight")).sum()) if dropped.any() else 0
    validity = _validity(
        lag_stats, _late_sends(c, ~c.warmup, scenario.validity.max_lag_p99), by_state, scenario,
        info.worker_losses + ((info.client_crashes,) if info.client_crashes else ()), at_limit,
    )
    validity["start_burst"] = start_burst(c, ~c.warmup, scenario.validity.max_lag_p99, scenario)
    if warmup_only:
        validity["valid"] = False
        validity["reasons"].append("the run stopped before its warm-up ended: every figure includes the warm-up")
    summary: dict[str, Any] = {
        "schema_version": SUMMARY_VERSION,
        "surgelab_version": __version__,
        "name": scenario.name,
        "started_at": info.started_at,
        "mode": _mode(scenario),
        "target": {"url": redact_url(scenario.target.base_url), "model": scenario.target.model,
                   "endpoint": scenario.target.endpoint, "stream": scenario.target.stream},  # fmt: skip
        "load": _load(scenario, planned),
        "stop_reason": info.stop_reason,
        "duration_s": window.length,
        "window": {"start_s": window.start, "end_s": window.end},
        "wall_s": info.wall_s,
        "requests": {
            "scheduled": len(c.state),
            "ok": by_state["ok"],
            "failed": sum(by_state[s.value] for s in FAILED_STATES),
            "dropped": by_state["dropped"],
            "cancelled": by_state["cancelled"],
            "lost": by_state["lost"],
            "by_state": by_state,
            "warmup": int(c.warmup.sum()),
            "measured": int((~c.warmup).sum()),
            "unanswered": overall["requests"]["unanswered"],
            "cut_short": overall["requests"]["cut_short"],
            "unsuccessful": overall["requests"]["unsuccessful"],
            "error_rate": overall["requests"]["error_rate"],
            "drop_rate": overall["requests"]["drop_rate"],
            **c.attempts,
        },
        "throughput": overall["throughput"],
        "latency_ms": overall["latency_ms"],
        "service_latency_ms": overall["service_latency_ms"],
        "schedule_lag_ms": {k: lag_stats[k] for k in ("mean", "p50", "p99", "max")},
        "validity": validity,
        "concurrency": _littles_law(c, window_start, window_end),
        "goodput": overall["goodput"],
        "tokens": {
            "prompt_total": overall["tokens"]["prompt_total"],
            "output_total": overall["tokens"]["output_total"],
            "usage_source": overall["tokens"]["usage_source"],
        },
        "prompt_lengths": _prompt_lengths(c, scenario.tokenizer),
        "by_phase": _breakdown(c, c.phase, lambda name: planned.phase_window(name, window), scenario),
        "by_class": _breakdown(c, c.request_class, window, scenario),
        "by_tier": _breakdown(c, c.tier, window, scenario, tiers=True),
        "by_kind": by_kind(c, window, scenario),
        "by_target": _breakdown(c, c.target, window, scenario) if (c.target != "").any() else {},
        "trends": _trends(c, window, scenario.target.stream),
    }
    ok = ~c.warmup & (c.state == State.OK.value)
    summary["streaming"] = buffered_streams(c, ok)
    for key, block in (("tools", tools_block(c)), ("agents", agents_block(c, scenario))):
        if block is not None:  # only runs that offered tools or ran agents
            summary[key] = block
    results = [_judge(t, c, ~c.warmup, summary) for t in scenario.thresholds]
    results += _default_bounds(scenario, summary["requests"], info.stop_reason or "")
    failover = _failover(c, scenario, info)
    if failover is not None:
        summary["failover"] = failover
        results += [t for t in [failover_threshold(failover)] if t]
    summary["thresholds"] = results
    summary["thresholds_passed"] = all(r["passed"] for r in results)
    failed = c.state.isin([s.value for s in FAILED_STATES])
    summary["network"] = network_block(c.source, ~c.warmup, scenario, failed)
    summary["rate_limits"] = rate_limit_block(c.source, ~c.warmup)
    insecure = summary["network"]["tls"]["insecure"] and (
        f"INSECURE: the certificate of {scenario.target.base_url} was not verified (target.tls.insecure): "
        "these figures may come from whoever answered — for test benches only"
    )
    tls = summary["network"]["tls_failure"] and (
        f"{summary['network']['tls_failures']} requests failed on TLS: {summary['network']['tls_failure']}"
    )
    resent = summary["requests"]["resent"] and (
        f"{summary['requests']['resent']} requests went out again on a new connection: the server had closed "
        "its kept-alive connection before reading them (records' resends; llama.cpp's server closes after every "
        "streamed answer) — target.connection: close spares the race"
    )
    warnings = (summary["prompt_lengths"].pop("warning"), tls, insecure, summary["rate_limits"]["verdict"], resent)
    summary["warnings"] = [w for w in warnings if w]
    summary["warnings"] += ramp_warnings(scenario) + context_warnings(scenario) + leak_warnings(summary["trends"])
    summary["warnings"] += buffering_warnings(summary["streaming"])
    uncounted = uncounted_tokens_warning(c, ok, summary["latency_ms"], scenario.tokenizer)
    summary["warnings"] += [uncounted] if uncounted else []
    summary["errors"] = top_errors(c.source, c.state, c.outcomes.against)
    summary["headline"] = headline(summary, max(p.load.grace for p in scenario.phase_list))
    return summary


def _failover(c: RecordColumns, scenario: Scenario, info: RunInfo) -> dict[str, Any] | None:
    """Switch-over times against the plan's bound (``analysis.failover``): a simulation's, or the live router's."""
    if info.failover is not None:
        return failover_block(info.failover["switch_overs"], info.failover.get("bound_s"))
    if info.routing is None:
        return None
    health = scenario.routing.health
    return failover_block(live_switch_overs(c, info.routing, health.failures), health.max_switch_over)


def _trends(c: RecordColumns, window: Window, stream: bool) -> dict[str, Any]:
    """Drift of the median latency (TTFT when streaming) and of the error rate over the measured run
    (every request that did not succeed counts, as in ``error_rate``; dropped ones were never sent)."""
    counted = ~c.warmup & c.outcomes.counted & ~c.outcomes.dropped
    failed = c.outcomes.against
    ok = c.outcomes.ok
    done = c.first_token if stream else c.end
    latency = np.where(ok & counted, done - c.intended, np.nan)
    return request_trends(c.intended, latency, failed, counted, window.start, window.end, "ttft" if stream else "e2e")


def leak_warnings(trends: dict[str, Any]) -> list[str]:
    """One sentence per leak-like trend (``analysis.trend``)."""
    return [
        Trend(**{**t, "slope_ci_per_hour": tuple(t["slope_ci_per_hour"])}).sentence()
        for t in trends.values()
        if isinstance(t, dict) and t.get("leak_like")
    ]


PROMPT_TOLERANCE = 0.10  # prompts more than this far from the length asked for are worth a warning


def _prompt_lengths(c: RecordColumns, tokenizer: str) -> dict[str, Any]:
    """Prompt tokens as surgelab meant them against the server's own count, over successes with server usage."""
    both = (c.state == State.OK.value) & (c.usage_source == "server") & np.isfinite(c.intended_prompt) & np.isfinite(c.prompt)
    both &= c.intended_prompt > 0
    block: dict[str, Any] = {"tokenizer": tokenizer, "compared": int(both.sum()), "intended_mean": None,
                             "server_mean": None, "ratio": None, "within_tolerance": None, "warning": None}  # fmt: skip
    if not block["compared"]:
        return block
    meant, counted = c.intended_prompt[both], c.prompt[both]
    ratio = float(counted.sum() / meant.sum())
    block.update(
        intended_mean=float(meant.mean()),
        server_mean=float(counted.mean()),
        ratio=ratio,
        within_tolerance=float(np.mean(np.abs(counted / meant - 1.0) <= PROMPT_TOLERANCE)),
    )
    if abs(ratio - 1.0) > PROMPT_TOLERANCE:
        why = (
            "the target offered no /tokenize surgelab could learn from: give its tokenizer.json (tokenizer: PATH)"
            if tokenizer in ("builtin", "auto")
            else "its tokenizer or chat template differs from what surgelab measured before the run"
        )
        block["warning"] = (
            f"prompts arrived {ratio:.2f}× the length asked for: {block['server_mean']:.0f} tokens on average as the "
            f"server counted them, {block['intended_mean']:.0f} meant ({tokenizer} tokenizer) — {why}"
        )
    return block


def _block(c: RecordColumns, rows: np.ndarray, window: Window, scenario: Scenario) -> dict[str, Any]:
    """Requests, throughput, latency and goodput of a subset of rows.

    Counts and latencies leave out requests intended during the warm-up; rates count every
    completion that *ended* inside the window, whenever it was sent — the steady-state
    completion rate, so that a window right after a warm-up is not short of the requests
    still finishing from it. Every request that did not succeed counts against the error rate
    and the goodput fraction, and a request given up on counts in TTFT and E2E as the time it
    waited (``analysis.outcomes``).
    """
    o = c.outcomes
    measured = rows & ~c.warmup
    is_ok = rows & o.ok
    ok = is_ok & measured
    counted = measured & o.counted
    n_failed, n_dropped = int((measured & o.failed).sum()), int((measured & o.dropped).sum())
    ok_in_window = is_ok & window.ended(c.end)
    out_tokens = float(np.nansum(c.output[ok_in_window]))
    in_tokens = float(np.nansum(c.prompt[ok_in_window]))
    n_counted = int(counted.sum())
    timed = measured & c.first_token_rows
    return {
        "requests": {
            "measured": int(measured.sum()),
            "ok": int(ok.sum()),
            "failed": n_failed,
            "dropped": n_dropped,
            "unanswered": int((measured & o.unanswered).sum()),
            "cut_short": int((measured & o.cut_short).sum()),
            "unsuccessful": int((measured & o.against).sum()),
            "error_rate": o.error_rate(measured),
            "drop_rate": n_dropped / n_counted if n_counted else 0.0,
        },
        "throughput": {
            "requests_per_s": window.per_s(float(ok_in_window.sum())),
            "output_tokens_per_s": window.per_s(out_tokens),
            "input_tokens_per_s": window.per_s(in_tokens),
            "total_tokens_per_s": window.per_s(out_tokens + in_tokens),
        },
        "latency_ms": {
            "ttft": censored_distribution(ttft_values(c, timed, c.intended)),
            "itl": c.itl_distribution(ok),
            "tpot": distribution(_tpot(c, ok, scenario.target.stream), 1000),
            "e2e": censored_distribution(e2e_values(c, measured, c.intended)),
        },
        "service_latency_ms": {
            "ttft": censored_distribution(ttft_values(c, timed, c.sent)),
            "e2e": censored_distribution(e2e_values(c, measured, c.sent)),
        },
        "goodput": goodput(c, measured, ok_in_window, window, scenario, scenario.slo),
        "tokens": {
            "prompt_total": int(np.nansum(c.prompt[ok])),
            "output_total": int(np.nansum(c.output[ok])),
            "usage_source": c.usage_source[ok].counts(),
        },
    }


def _breakdown(
    c: RecordColumns, labels: Labels, window: Window | Callable[[str], Window], scenario: Scenario, tiers: bool = False
) -> dict[str, Any]:
    """The same block for every distinct label (phase, class or tier); a tier shows the SLO it was judged by.

    ``window`` may depend on the label: a phase's rates are over its own window.
    """
    result = {}
    for label in labels.distinct():
        block = _block(c, labels == label, window(str(label)) if callable(window) else window, scenario)
        del block["tokens"]["usage_source"]
        if tiers:
            block["goodput"]["slo_ms"] = slo_ms(scenario.slo_of(str(label)))
        result[str(label)] = block
    return result


def _lag(c: RecordColumns, rows: np.ndarray) -> dict[str, Any]:
    has_sent = rows & ~np.isnan(c.sent)
    return distribution(c.sent[has_sent] - c.intended[has_sent], 1000)


def _mode(scenario: Scenario) -> str:
    modes = {p.load.mode for p in scenario.phase_list}
    return modes.pop() if len(modes) == 1 else "mixed"


def _load(scenario: Scenario, planned: Planned) -> dict[str, Any]:
    """The load as planned: the single phase's figures, and every phase described."""
    phases = scenario.phase_list
    first = phases[0].load
    single = len(phases) == 1
    return {
        "rate": first.shape.peak if single and first.mode == "open" else None,
        "arrival": first.arrival.value if single and first.mode == "open" else None,
        "concurrency": first.shape.peak if single and first.mode == "closed" else None,
        "planned_duration_s": planned.duration_s,
        "warmup_s": planned.window_start_s,
        "phases": [{"name": p.name, "mode": p.load.mode, "start_s": p.start, "shape": p.load.describe()} for p in phases],
    }


def _tpot(c: RecordColumns, mask: np.ndarray, stream: bool) -> np.ndarray:
    if not stream:
        return np.empty(0)
    sel = mask & (c.output > 1)
    return (c.end[sel] - c.first_token[sel]) / (c.output[sel] - 1)


def _littles_law(c: RecordColumns, start: float, end: float) -> dict[str, float | None]:
    """Measured mean in flight against λ·W over the window (L = λW)."""
    window = end - start
    if window <= 0:
        return {"mean_in_flight": None, "littles_law_estimate": None, "arrival_rate": None, "mean_latency_s": None}
    live = ~np.isnan(c.sent) & ~np.isnan(c.end)
    overlap = np.clip(np.minimum(c.end[live], end) - np.maximum(c.sent[live], start), 0, None)
    mean_in_flight = float(overlap.sum() / window)
    done = live & (c.end >= start) & (c.end <= end)
    rate = float(done.sum() / window)
    latency = float(np.mean(c.end[done] - c.sent[done])) if done.any() else None
    return {
        "mean_in_flight": mean_in_flight,
        "littles_law_estimate": rate * latency if latency is not None else None,
        "arrival_rate": rate,
        "mean_latency_s": latency,
    }


def _late_sends(c: RecordColumns, rows: np.ndarray, bound_s: float) -> tuple[int, int]:
    """(sends later than ``bound_s`` after their intended time, sends) among ``rows``."""
    has_sent = rows & ~np.isnan(c.sent)
    return int(np.sum((c.sent[has_sent] - c.intended[has_sent]) > bound_s)), int(has_sent.sum())


def _crashes_text(crashes: dict[str, Any] | None) -> str | None:
    if not crashes:
        return None
    return (f"{crashes['count']} request task(s) raised inside surgelab ({crashes['first']}): the requests they "
            "would have sent are missing from the records — a surgelab bug, the traceback is on stderr")  # fmt: skip


def _validity(lag: dict[str, Any], late: tuple[int, int], by_state: dict[str, int], scenario: Scenario,
              losses: tuple[str, ...] = (), at_limit: int = 0) -> dict[str, Any]:  # fmt: skip
    """Invalid when a worker died with part of the load, when the client fell behind by enough sends
    to matter (more than ``max_late_share`` of them late *and* at least ``min_late_sends``: one slow
    send out of 20 is a P99, not a client that cannot keep up), or when requests were dropped at the
    client's ``max_in_flight`` (``at_limit``). What a user of ``load.users`` still held when its phase
    ended is dropped too, but by the workload's own rule: it counts against the run, not its validity."""
    reasons = list(losses)  # a worker died: part of the planned load was never sent or never came back
    if by_state["lost"] and not losses:
        reasons.append(f"{by_state['lost']} requests lost with a worker that died")
    rules = scenario.validity
    bound_ms = rules.max_lag_p99 * 1000
    n_late, sends = late
    if sends and n_late >= rules.min_late_sends and n_late / sends > rules.max_late_share:
        p99 = f"lag P99 {lag['p99']:.1f} ms" if lag["p99"] is not None else "lag P99 unknown"
        reasons.append(
            f"client fell behind its schedule: {n_late} of {sends} sends ({n_late / sends:.1%}) more than {bound_ms:g} ms late ({p99})"
        )
    if at_limit and not scenario.validity.allow_drops:
        limits = ", ".join(f"{p.load.max_in_flight}" for p in scenario.phase_list if p.load.mode == "open")
        reasons.append(f"{at_limit} requests dropped at max_in_flight ({limits})")
    return {"valid": not reasons, "reasons": reasons, "max_lag_p99_ms": bound_ms, "late_sends": n_late, "sends": sends}


def _judge(threshold: Threshold, c: RecordColumns, measured: np.ndarray, summary: dict[str, Any]) -> dict[str, Any]:
    """Observed value of a threshold's quantity (seconds or a fraction) and its verdict."""
    if threshold.aggregation is not None:
        observed = _aggregate(threshold.aggregation, threshold.metric, c, measured, summary["target"]["stream"])
    else:
        observed = {
            "error_rate": summary["requests"]["error_rate"],
            "drop_rate": summary["requests"]["drop_rate"],
            "throughput": summary["throughput"]["requests_per_s"],
            "output_tokens_per_s": summary["throughput"]["output_tokens_per_s"],
            "goodput": summary["goodput"]["requests_per_s"],
        }[threshold.metric]
    return {"expr": threshold.expr, "metric": threshold.key, "observed": observed, "passed": threshold.passes(observed),
            "abort_on_fail": threshold.abort_on_fail, "default": False}  # fmt: skip


DEFAULT_MAX_ERROR_RATE = 0.10  # a run with more failures than this fails, unless a threshold on error_rate says otherwise


def _default_bounds(scenario: Scenario, requests: dict[str, Any], stop_reason: str) -> list[dict[str, Any]]:
    """The criteria every run is judged by, so a CI job never passes against a dead endpoint: the
    error rate stays under 10 % (a threshold of the scenario's own on ``error_rate`` replaces
    this one), and a run that sent requests had at least one succeed (``ok > 0``, listed only when
    it fails). Not judged when interrupted."""
    if stop_reason.startswith("interrupted") or requests["scheduled"] == requests["dropped"]:
        return []
    bounds = []
    if not any(t.metric == "error_rate" for t in scenario.thresholds):
        rate = requests["error_rate"]
        bounds.append({"expr": f"error_rate < {DEFAULT_MAX_ERROR_RATE:.0%}", "metric": "error_rate", "observed": rate,
                       "passed": rate < DEFAULT_MAX_ERROR_RATE, "abort_on_fail": False, "default": True})  # fmt: skip
    if requests["ok"] == 0:  # listed only when it fails: then it is why the run failed
        bounds.append({"expr": "ok > 0", "metric": "ok", "observed": 0, "passed": False, "abort_on_fail": False,
                       "default": True})  # fmt: skip
    return bounds


def _aggregate(agg: str, metric: str, c: RecordColumns, measured: np.ndarray, stream: bool) -> float | None:
    """A threshold's aggregation (mean, min, max or pNN) of one metric over the ``measured`` rows, in
    seconds: TTFT and E2E with the censored waits of requests given up on, as the summary shows them."""
    ok = measured & c.outcomes.ok
    if metric == "itl":  # from the integer gaps, never held as floats
        itl = c.gaps.summary(ok, 1.0)
        if itl.n == 0:
            return None
        return getattr(itl, agg)() if agg in ("mean", "min", "max") else float(itl.quantiles(float(agg[1:]) / 100)[0])
    values = {
        "ttft": lambda: ttft_values(c, measured & c.first_token_rows, c.intended)[0],
        "e2e": lambda: e2e_values(c, measured, c.intended)[0],
        "tpot": lambda: _tpot(c, ok, stream),
    }[metric]()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    if agg in ("mean", "min", "max"):
        return float(getattr(np, agg)(values))
    return float(np.percentile(values, float(agg[1:])))


def _attempts(
    status: np.ndarray | None, attempts: np.ndarray | None, resends: np.ndarray | None, rows: int
) -> dict[str, int]:
    """429s counted on their own (the target's rate limit, not its failure), retries (target.retry), and
    requests sent again on a new connection because the pooled one had been closed (not failures either)."""
    status = status if status is not None else np.empty(0)
    rate_limited = int(np.sum(np.nan_to_num(status.astype(float), nan=0) == 429))
    resent = int(np.sum(np.nan_to_num(resends.astype(float), nan=0) > 0)) if resends is not None else 0
    if attempts is None:
        return {"rate_limited": rate_limited, "retried": 0, "attempts": rows, "resent": resent}
    sends = np.nan_to_num(attempts.astype(float), nan=1.0)
    return {"rate_limited": rate_limited, "retried": int(np.sum(sends > 1)), "attempts": int(sends.sum()), "resent": resent}
