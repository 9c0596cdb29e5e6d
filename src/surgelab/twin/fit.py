"""Fit an engine profile's step-time coefficients to what a replica did under load.

Two kinds of observation carry the step time (``observations.py``): decode gaps (one pure
decode step of ``b`` sequences reading ``r`` tokens of KV) and idle prefills (a prompt of ``P``
tokens prefilled alone, in ``ceil(P / max_batched_tokens)`` chunks). Each is priced by the
profile's formula (``EngineProfile.price``), which is linear in the coefficients once the
structure is chosen (``structure.py``).

The structure is chosen by held-out error: the observations are split (70 % to fit, 30 % held
out, each kind on its own), every candidate — ``combine`` max or sum, with or without the
attention term and the per-sequence term — is fitted on the first part and scored on the
second (mean absolute relative error, the two kinds weighted equally). The lowest score wins;
a candidate within 2 % (relative, or 0.2 points) of it with fewer terms wins instead, so a
term has to earn its place. The winner is then fitted on every observation.

Nothing is written silently: a coefficient the records cannot identify keeps the base
profile's value and says so, a negative estimate is held at 0 with a warning that names it and
its value, and a term outside the chosen structure is reported as such.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.engine.profile import EngineProfile
from surgelab.twin.observations import Observations, observe_runs, run_dirs
from surgelab.twin.structure import KINDS, PARAMS, STRUCTURES, Rows, Solution, Structure, solve, stderr

__all__ = ["Candidate", "Coefficient", "FitResult", "fit_observations", "fit_profile", "line_fit", "rows_of"]

_BINS = 16
_HELD_OUT = 0.3
_SIMPLER = (0.02, 0.002)  # a richer structure must beat a simpler one by 2 % relative and 0.2 points


@dataclass(frozen=True)
class Coefficient:
    value: float
    stderr: float | None  # standard error (HC1 sandwich of the least-squares fit)
    source: str = "fitted"  # fitted | derived | kept from base profile | clamped to 0 | not in structure

    @property
    def relative_error(self) -> float | None:
        return self.stderr / abs(self.value) if self.stderr is not None and self.value else None


@dataclass(frozen=True)
class Candidate:
    structure: str
    terms: int
    held_out: dict[str, float]  # mean absolute relative error per kind ("decode", "prefill", "mixed") and "score"
    chosen: bool = False


@dataclass
class FitResult:
    profile: EngineProfile
    coefficients: dict[str, Coefficient]
    residual: dict[str, float]  # per kind: relative RMS error of the fit against bin medians (_misfit)
    samples: dict[str, int]
    notes: list[str] = field(default_factory=list)
    structure: str = "max"
    candidates: list[Candidate] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.to_dict(),
            "coefficients": {k: asdict(v) for k, v in self.coefficients.items()},
            "residual": self.residual, "samples": self.samples, "notes": self.notes,
            "structure": self.structure, "candidates": [asdict(c) for c in self.candidates], "reason": self.reason,
        }  # fmt: skip


def _binned(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    bins = max(2, min(_BINS, x.size // 4))  # at least a few samples behind every median
    edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)))
    if edges.size < 2:
        return np.array([np.median(x)]), np.array([np.median(y)]), np.array([x.size])
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.size - 2)
    xs, ys, ws = [], [], []
    for b in range(edges.size - 1):
        mine = which == b
        if mine.sum() >= 2:
            xs.append(np.median(x[mine]))
            ys.append(np.median(y[mine]))
            ws.append(mine.sum())
    return np.array(xs), np.array(ys), np.array(ws, dtype=float)


def line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(intercept, slope, relative RMS residual) through the bin medians, by Theil–Sen.

    The slope is the median of the slopes between every pair of bins and the intercept the
    median of what each bin leaves, so one bin thrown by a busy moment cannot tilt the line.
    """
    bx, by, bw = _binned(x, y)
    if bx.size < 2 or np.ptp(bx) == 0:
        return float(np.median(y)), 0.0, 0.0
    i, j = np.triu_indices(bx.size, k=1)
    dx = bx[j] - bx[i]
    keep = dx > 0
    b = float(np.median((by[j] - by[i])[keep] / dx[keep])) if keep.any() else 0.0
    a = float(np.median(by - b * bx))
    predicted = a + b * bx
    rms = float(np.sqrt(np.average(((by - predicted) / np.maximum(by, 1e-12)) ** 2, weights=bw)))
    return a, b, rms


def _misfit(predicted: np.ndarray, y: np.ndarray) -> float:
    """The fit's relative RMS error against the medians of bins of its prediction: how far it is from what the
    steps typically took, not the scatter of single wall-clock gaps (a busy machine's jitter) around it."""
    bx, by, bw = _binned(predicted, y)
    return float(np.sqrt(np.average(((bx - by) / np.maximum(by, 1e-9)) ** 2, weights=bw))) if bw.size else 0.0


def rows_of(obs: Observations, budget: int) -> Rows:
    """The observations as priced work: decode gaps one step each, idle prefills in chunks of ``budget``
    tokens, mixed steps one step each (those whose prompt and batch fit ``budget``, so that it was not chunked)."""
    prompt = obs.prefill_tokens.astype(np.int64)
    chunks = np.maximum(1, -(-prompt // budget))
    full = chunks - 1  # chunks of ``budget`` before the last; chunk j reads (j + 1)·budget tokens of KV, the last all P
    kv = budget * full * (full + 1) // 2 + prompt
    batch = obs.gap_batch.astype(float)
    whole = obs.mixed_prompt + obs.mixed_batch <= budget
    m_prompt, m_batch = obs.mixed_prompt[whole].astype(float), obs.mixed_batch[whole].astype(float)
    d, p, m = obs.gap_s.size, prompt.size, m_prompt.size
    cat = np.concatenate
    return Rows(
        y=cat([obs.gap_s, obs.prefill_s, obs.mixed_s[whole]]), kind=np.repeat([0, 1, 2], [d, p, m]),
        steps=cat([np.ones(d), chunks.astype(float), np.ones(m)]), seqs=cat([batch, chunks.astype(float), m_batch + 1]),
        kv=cat([obs.gap_kv, kv.astype(float), obs.mixed_kv[whole] + m_prompt]),
        tokens=cat([batch, prompt.astype(float), m_batch + m_prompt]),
        pairs=cat([np.zeros(d), (prompt * (prompt + 1) / 2).astype(float), m_prompt * (m_prompt + 1) / 2]),
    )  # fmt: skip


def _split(rows: Rows, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out row indices, each kind split on its own (a kind with < 4 rows is only trained on)."""
    train, test = [], []
    for k in KINDS:
        mine = rng.permutation(np.flatnonzero(rows.kind == k))
        cut = int(round(mine.size * _HELD_OUT)) if mine.size >= 4 else 0
        test.append(mine[:cut])
        train.append(mine[cut:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _errors(rows: Rows, solution: Solution) -> dict[str, float]:
    rel = np.abs(rows.predict(solution.structure, solution.values) - rows.y) / np.maximum(rows.y, 1e-9)
    out = {name: float(np.median(rel[rows.kind == k])) for k, name in KINDS.items() if (rows.kind == k).any()}
    out["score"] = float(np.mean(list(out.values()))) if out else float("nan")
    return out


def _choose(rows: Rows, rng: np.random.Generator, held: dict[str, float]) -> tuple[Structure, list[Candidate], str]:
    train, test = _split(rows, rng)
    if test.size == 0:
        return STRUCTURES[0], [], "too few observations to hold any out: the roofline (max) kept"
    fit_rows, test_rows = rows.take(train), rows.take(test)
    scored = [(s, _errors(test_rows, solve(fit_rows, s, held))) for s in STRUCTURES]
    best_s, best = min(scored, key=lambda x: x[1]["score"])
    margin = max(best["score"] * _SIMPLER[0], _SIMPLER[1])
    close = [x for x in scored if x[1]["score"] <= best["score"] + margin]
    chosen, err = min(close, key=lambda x: (len(x[0].params), x[1]["score"]))
    if chosen == best_s:
        reason = f"{chosen.name}: the lowest held-out error ({err['score']:.2%})"
        runner = min((x for x in scored if x[0] != chosen), key=lambda x: x[1]["score"])
        reason += f"; next {runner[0].name} at {runner[1]['score']:.2%}"
    else:
        reason = (f"{chosen.name}: held-out error {err['score']:.2%}, within {margin:.2%} of the lowest "
                  f"({best_s.name}, {best['score']:.2%}) with fewer terms")  # fmt: skip
    table = [Candidate(s.name, len(s.params), e, s == chosen) for s, e in scored]
    return chosen, table, reason


def _coefficients(sol: Solution, held: dict[str, float], base_given: bool, notes: list[str]) -> dict[str, Coefficient]:
    out: dict[str, Coefficient] = {}
    se = dict(zip(sol.solved, np.sqrt(np.maximum(np.diag(sol.cov), 0.0)).tolist())) if sol.solved else {}
    for name in PARAMS:
        if name not in sol.structure.params:
            out[name] = Coefficient(0.0, None, "not in structure")
        elif name in sol.negative:
            value, error = sol.negative[name]
            out[name] = Coefficient(0.0, error, "clamped to 0")
            notes.append(f"WARNING {name}: the estimate was negative, {value:.4g} ± {error:.2g} (1 s.e.); held at 0 "
                         "and the other coefficients fitted again without it")  # fmt: skip
        elif name in sol.held:
            kept = f"kept {held[name]:.4g} from the base profile" if base_given else \
                f"no base profile, so {held[name]:.4g} (give --base to keep a known value)"  # fmt: skip
            out[name] = Coefficient(held[name], None, "kept from base profile" if base_given else "default (no base)")
            notes.append(f"WARNING {name}: not identifiable from these records ({sol.held[name]}): {kept}")
        else:
            out[name] = Coefficient(sol.values[name], se[name])
    step = ("step_overhead_s", "decode_base_s")
    out["decode_step_base_s"] = Coefficient(sum(sol.values.get(k, 0.0) for k in step), stderr(sol, dict.fromkeys(step, 1.0)), "derived")
    order = ("prefill_s_per_token", "decode_base_s", "s_per_kv_token", "step_overhead_s", "decode_step_base_s",
             "request_overhead_s")  # fmt: skip
    return {k: out[k] for k in (*order, *[p for p in PARAMS if p not in order])}


def fit_observations(obs: Observations, base: EngineProfile | None = None, seed: int = 0, slots: int | None = None,
                     label: str = "records") -> FitResult:  # fmt: skip
    """Choose a structure by held-out error and fit it to ``obs``; ``base`` supplies what the records cannot show."""
    if obs.gap_s.size < 20:
        raise ValueError(f"{label}: too few streamed token gaps ({obs.gap_s.size}) to fit — stream, and send more requests")
    notes: list[str] = []
    template = base or EngineProfile("fitted", 0.0, 0.0, 0.0, 0.0, 1 << 22, max(slots or obs.max_running, 1), 8192)
    held = {name: float(getattr(template, name)) for name in PARAMS}
    rows = rows_of(obs, template.max_batched_tokens)
    if obs.prefill_s.size < 6 or np.ptp(obs.prefill_tokens) == 0:
        notes.append(
            f"{obs.prefill_s.size} idle prefills, {np.unique(obs.prefill_tokens).size} prompt length(s): prefill is only "
            "identified by idle requests with varied prompts — give the sweep a low level and long, varied prompts "
            "(prompt_tokens as a distribution)"
        )
    structure, candidates, reason = _choose(rows, np.random.default_rng([seed, 2]), held)
    sol = solve(rows, structure, held)
    coefficients = _coefficients(sol, held, base is not None, notes)
    fitted = {k: c.value for k, c in coefficients.items() if k in PARAMS}
    predicted = rows.predict(structure, fitted)
    residual = {name: _misfit(predicted[mine], rows.y[mine]) if (mine := sol.kept & (rows.kind == k)).any() else 0.0
                for k, name in KINDS.items()}  # fmt: skip
    if base is None:
        notes.append("kv_capacity_tokens and max_batched_tokens are not visible from the client: generous defaults used "
                     f"(max_batched_tokens {template.max_batched_tokens}; give --base for the server's own)")  # fmt: skip
    long = int((obs.prefill_tokens > template.max_batched_tokens).sum())
    if long:
        notes.append(f"{long} idle prefills are longer than max_batched_tokens = {template.max_batched_tokens}: priced as "
                     "that many tokens per step (chunked prefill), as the engine runs them")  # fmt: skip
    # the base's limits and memory stay; its step-time terms the structure does not price go (what the fit measured
    # holds them), and so does its GPU: a fitted profile's error is its fit's, not the physics' (engine.accuracy)
    unpriced = {"comm_s_per_token": 0.0, "expert_s": 0.0, "num_experts": 0, "experts_per_token": 0, "gpu": ""}
    terms: dict[str, Any] = {**unpriced, **fitted}  # EngineProfile fields by name, of several types
    profile = replace(template, name="fitted", combine=structure.combine, max_num_seqs=max(slots or obs.max_running, 1),
                      description=f"fitted from {label}", **terms)  # fmt: skip
    compute_bound = int(((rows.kind == 1) & ~sol.memory).sum())
    return FitResult(
        profile=profile, coefficients=coefficients, residual=residual,
        samples={"decode_gaps": int(obs.gap_s.size), "idle_prefills": int(obs.prefill_s.size),
                 "mixed_steps": int((rows.kind == 2).sum()),
                 "compute_bound_prefills": compute_bound, "requests": obs.requests,
                 "trimmed": int((~sol.kept).sum())},
        notes=notes, structure=structure.name, candidates=candidates, reason=reason,
    )  # fmt: skip


def _scraped_running_max(paths: list[Path]) -> int | None:
    """The server's running gauge at its highest, from the runs' telemetry, if any was scraped."""
    best = None
    for path in paths:
        try:
            summary = json.loads((path / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        running = (summary.get("telemetry") or {}).get("roles", {}).get("running")
        if running and running.get("max"):
            best = max(best or 0, int(round(running["max"])))
    return best


def fit_profile(path: Path, base: EngineProfile | None = None, seed: int = 0, running_max: int | None = None) -> FitResult:
    """Fit from a run or a sweep directory; ``base`` supplies what the records cannot show."""
    obs = observe_runs(run_dirs(path), seed)
    scraped = _scraped_running_max(run_dirs(path))
    slots = running_max or scraped or obs.max_running
    result = fit_observations(obs, base, seed, slots, str(path))
    if running_max is None and scraped is None:
        result.notes.append(f"max_num_seqs = {slots}, the most requests seen decoding at once: a lower bound unless the load saturated the server")
    elif running_max is None:
        result.notes.append(f"max_num_seqs = {slots}, the server's own running gauge at its highest (telemetry)")
    return result
