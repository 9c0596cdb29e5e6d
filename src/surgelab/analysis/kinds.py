"""``by_kind`` in summary.json: each request kind with the figures that fit it (docs/summary.md).

What fits a kind is its spec's (``surgelab.kinds``). TTFT, ITL and TPOT appear only for kinds that
stream tokens (chat, completions, vision, responses, messages, with ``target.stream``) and for a
flow (its last step's); speech has its time to first audio byte instead. Every kind has E2E,
requests per second, and throughput in its own unit; transcription has the real-time factor
(processing time ÷ audio duration, below 1 is faster than real time) and speech the audio
seconds produced per second of processing. Goodput judges each request as the whole summary
does (``analysis.slo``): its tier's objectives, then its kind's (``kinds.<kind>.slo``), then the
scenario's ``slo``, using only the objectives that fit the kind.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from surgelab.analysis.outcomes import censored_distribution, e2e_values, ttft_values
from surgelab.analysis.slo import fitting, goodput, kinds_of, objectives
from surgelab.analysis.stats import distribution
from surgelab.kinds import KINDS, KindSpec
from surgelab.scenario.model import Scenario

__all__ = ["by_kind"]


def by_kind(c: Any, window: Any, scenario: Scenario) -> dict[str, Any]:
    """One block per kind present in the records (``c``: the summary's columns)."""
    kinds = kinds_of(c, scenario)
    units = _Units(c)
    result = {}
    for kind in kinds.distinct():
        result[kind] = _block(c, kinds == kind, kind, window, scenario, units)
    return result


class _Units:
    """Unit and step columns, read only when a kind that reports them is present."""

    def __init__(self, c: Any) -> None:
        self._c = c
        self._floats: dict[str, np.ndarray] = {}
        self._steps: list[Any] | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._floats:
            self._floats[name] = self._c.source.floats(name)
        return self._floats[name]

    def steps(self) -> list[Any]:
        if self._steps is None:
            source = self._c.source
            has = source.has("step_ms")
            self._steps = [s for b in source.batches("step_ms") for s in b.to_pylist()] if has else [None] * source.rows
        return self._steps


def _block(c: Any, rows: np.ndarray, kind: str, window: Any, scenario: Scenario, units: _Units) -> dict:
    measured = rows & ~c.warmup
    ok = measured & c.outcomes.ok
    # rates count every success that ended in the window, warm-up ones included (as summary.py does)
    ok_in_window = rows & c.outcomes.ok & window.ended(c.end)
    spec = KINDS.get(kind) or KindSpec(kind)  # a kind the registry does not know: requests and E2E alone
    streams = spec.streams and scenario.target.stream
    throughput = {"requests_per_s": window.per_s(float(ok_in_window.sum()))}
    if spec.unit is not None:
        name, column = spec.unit
        throughput[name] = window.per_s(float(np.nansum(units[column][ok_in_window])))
    if spec.input_tokens:
        throughput["input_tokens_per_s"] = window.per_s(float(np.nansum(c.prompt[ok_in_window])))
    if spec.output_tokens:
        throughput["output_tokens_per_s"] = window.per_s(float(np.nansum(c.output[ok_in_window])))
    # given-up requests count as their wait in TTFT and E2E, as everywhere in the summary (analysis.outcomes)
    latency: dict[str, Any] = {"e2e": censored_distribution(e2e_values(c, measured, c.intended))}
    service: dict[str, Any] = {"e2e": censored_distribution(e2e_values(c, measured, c.sent))}
    if streams or spec.chain:  # a chain's tokens are its last step's
        latency["ttft"] = censored_distribution(ttft_values(c, measured, c.intended))
        latency["itl"] = c.itl_distribution(ok)
        sel = ok & (c.output > 1)
        latency["tpot"] = distribution((c.end[sel] - c.first_token[sel]) / (c.output[sel] - 1), 1000)
        service["ttft"] = censored_distribution(ttft_values(c, measured, c.sent))
    if "ttfa" in spec.figures:
        latency["ttfa"] = distribution(c.first_token[ok] - c.intended[ok], 1000)
        service["ttfa"] = distribution(c.first_token[ok] - c.sent[ok], 1000)
    block: dict[str, Any] = {
        "requests": {"measured": int(measured.sum()), "ok": int(ok.sum()), "failed": int((measured & c.outcomes.failed).sum()),
                     "unsuccessful": int((measured & c.outcomes.against).sum()),
                     "error_rate": c.outcomes.error_rate(measured)},  # fmt: skip
        "throughput": throughput,
        "latency_ms": latency,
        "service_latency_ms": service,
    }
    with np.errstate(invalid="ignore", divide="ignore"):
        if "real_time_factor" in spec.figures:
            block["real_time_factor"] = distribution((c.end[ok] - c.sent[ok]) / units["input_units"][ok], 1)
        if "audio_s_per_s" in spec.figures:
            block["audio_s_per_s"] = distribution(units["output_units"][ok] / (c.end[ok] - c.sent[ok]), 1)
    if "steps" in spec.figures:
        block["steps"] = _step_shares(c, ok, units.steps(), scenario)
    # the rows judged as everywhere in the summary; ``slo_ms`` shows the kind's objectives (its own over the
    # scenario's, those that fit), which its requests meet unless their tier sets its own
    shown = fitting(objectives(scenario, "", kind), kind, scenario.target.stream)
    block["goodput"] = goodput(c, measured, ok_in_window, window, scenario, shown)
    return block


def _step_shares(c: Any, ok: np.ndarray, steps: list, scenario: Scenario) -> dict[str, list[dict[str, Any]]]:
    """Per flow class: each step's mean time and its share of the chain's mean time."""
    names = {cls.name: [s.name for s in cls.flow or ()]
             for p in scenario.phase_list for cls in scenario.workload_of(p).classes}  # fmt: skip
    result = {}
    for label in c.request_class[ok].distinct():
        times = np.array([steps[i] for i in np.flatnonzero(ok & (c.request_class == label)) if steps[i]], dtype=float)
        if times.size == 0:
            continue
        means = times.mean(axis=0)
        step_names = names.get(str(label)) or [f"step{i + 1}" for i in range(len(means))]
        result[str(label)] = [
            {"step": step_names[i] if i < len(step_names) else f"step{i + 1}", "mean_ms": float(m),
             "share": float(m / means.sum()) if means.sum() > 0 else None}  # fmt: skip
            for i, m in enumerate(means)
        ]
    return result
