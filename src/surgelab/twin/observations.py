"""What a client can see of a server's steps, pulled out of a run's records.

Two kinds of sample carry the engine's cost model (engine/profile.py):

* **decode gaps** — the time between two tokens of one request when no other request's first
  token lands inside the gap (so no prefill shared the step). Each is one memory-bound step:
  ``overhead + decode_base + s_per_kv_token × (KV tokens read)``, where the KV read is the
  context of every request running at that moment (prompt + tokens generated so far).
* **idle prefills** — the time to first token, from the actual send, of a request that found
  the server idle (no other request in flight from its send to its first token): the steps
  that prefill its prompt alone (plus the network).
* **mixed steps** — a gap of one request inside which exactly one other request's first token
  lands: the step that decoded the running batch *and* prefilled that prompt. How its parts
  combine (``max`` or ``sum``) shows here, where both are large, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from surgelab.metrics.store import read_records

__all__ = ["Observations", "observe_runs", "run_dirs"]

_MAX_GAPS = 20_000  # a sample is plenty for a six-parameter fit; keeps the fit fast on long sweeps
_MAX_MIXED = 2_000


@dataclass
class Observations:
    gap_s: np.ndarray  # decode step durations
    gap_kv: np.ndarray  # KV tokens read in that step
    gap_batch: np.ndarray  # sequences running then
    prefill_s: np.ndarray  # idle TTFT, seconds
    prefill_tokens: np.ndarray
    max_running: int  # most requests seen decoding at once
    requests: int
    mixed_s: np.ndarray = field(default_factory=lambda: np.empty(0))  # mixed step durations
    mixed_kv: np.ndarray = field(default_factory=lambda: np.empty(0))  # KV read by the decoding batch then
    mixed_batch: np.ndarray = field(default_factory=lambda: np.empty(0))  # sequences decoding then
    mixed_prompt: np.ndarray = field(default_factory=lambda: np.empty(0))  # the prompt prefilled in the step


def run_dirs(path: Path) -> list[Path]:
    """A run directory, or every run inside a sweep (or any folder of runs)."""
    path = Path(path)
    if (path / "records.parquet").is_file() or (path / "records.parts").is_dir():
        return [path]
    found = sorted(p.parent for p in path.rglob("records.parquet"))
    if not found:
        raise FileNotFoundError(f"{path}: no run directory (records.parquet) found")
    return found


def _observe(run: Path, rng: np.random.Generator) -> Observations:
    t = read_records(run)
    ok = np.array([s == "ok" for s in t["state"].to_pylist()])
    col = {n: np.array(t[n].to_pylist(), dtype=float)[ok] for n in ("sent_ns", "first_token_ns", "end_ns", "prompt_tokens")}
    itl = [np.array(x, dtype=float) * 1e3 for x, keep in zip(t["itl_us"].to_pylist(), ok) if keep]  # ns
    sent, first, end, prompt = col["sent_ns"], col["first_token_ns"], col["end_ns"], col["prompt_tokens"]
    n = len(sent)
    empty = np.empty(0)
    if n == 0:
        return Observations(empty, empty, empty, empty, empty, 0, 0)
    by_first = np.argsort(first, kind="stable")
    # Decode gaps: sample, keep the pure ones, price their KV read.
    owners = np.concatenate([np.full(len(g), i) for i, g in enumerate(itl)]) if itl else np.empty(0, int)
    ends = np.concatenate([first[i] + np.cumsum(g) for i, g in enumerate(itl)]) if itl else empty
    gaps = np.concatenate(itl) if itl else empty
    if gaps.size > _MAX_GAPS:
        pick = rng.choice(gaps.size, _MAX_GAPS, replace=False)
        owners, ends, gaps = owners[pick], ends[pick], gaps[pick]
    firsts_sorted = np.sort(first)
    starts = ends - gaps
    lo = np.searchsorted(firsts_sorted, starts, side="right")
    hi = np.searchsorted(firsts_sorted, ends + 1e5, side="right")  # a first token within the gap (0.1 ms slack)
    pure = (hi - lo) == 0
    mixed = (hi - lo) == 1
    # the newcomer's first token ends the gap (a token at its start, within the µs rounding of the gaps, belongs
    # to the step before: it was decoding in this one)
    mixed[mixed] = firsts_sorted[lo[mixed]] > starts[mixed] + gaps[mixed] / 2
    if mixed.sum() > _MAX_MIXED:
        mixed[rng.choice(np.flatnonzero(mixed), mixed.sum() - _MAX_MIXED, replace=False)] = False
    newcomer = by_first[lo[mixed]]  # the request whose prompt the step prefilled
    mix_ends, mix_gaps, mix_starts = ends[mixed], gaps[mixed], starts[mixed]
    owners, ends, gaps, starts = owners[pure], ends[pure], gaps[pure], starts[pure]
    mean_itl = np.array([g.mean() if g.size and g.mean() > 0 else np.inf for g in itl])

    def decoding(a: np.ndarray, b: np.ndarray, skip: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        kv, batch = np.empty(a.size), np.empty(a.size)
        for k in range(a.size):
            m = (a[k] + b[k]) / 2
            running = (first <= m) & (end > m)
            if skip is not None:
                running[skip[k]] = False
            generated = 1 + np.floor((m - first[running]) / mean_itl[running])
            kv[k] = float(np.sum(prompt[running] + generated))
            batch[k] = running.sum()
        return kv, batch

    kv, batch = decoding(starts, ends)
    mix_kv, mix_batch = decoding(mix_starts, mix_ends, newcomer)
    # Idle prefills: nothing else in flight from this request's send to its first token.
    order = np.argsort(sent)
    busy_until = np.maximum.accumulate(end[order])
    previous_busy = np.concatenate([[-np.inf], busy_until[:-1]])
    alone_before = previous_busy < sent[order]
    next_sent = np.concatenate([sent[order][1:], [np.inf]])
    alone_after = next_sent > first[order]
    idle = order[alone_before & alone_after]
    # The most requests decoding at once (a sweep line over [first token, end]).
    events = np.concatenate([np.stack([first, np.ones(n)], 1), np.stack([end, -np.ones(n)], 1)])
    events = events[np.lexsort((events[:, 1], events[:, 0]))]
    max_running = int(np.max(np.cumsum(events[:, 1])))
    return Observations(gaps / 1e9, kv, batch, (first[idle] - sent[idle]) / 1e9, prompt[idle], max_running, n,
                        mix_gaps / 1e9, mix_kv, mix_batch, prompt[newcomer])  # fmt: skip


def observe_runs(paths: list[Path], seed: int = 0) -> Observations:
    rng = np.random.default_rng(seed)
    parts = [_observe(p, rng) for p in paths]

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return Observations(
        cat("gap_s"), cat("gap_kv"), cat("gap_batch"), cat("prefill_s"), cat("prefill_tokens"),
        max(p.max_running for p in parts), sum(p.requests for p in parts),
        cat("mixed_s"), cat("mixed_kv"), cat("mixed_batch"), cat("mixed_prompt"),
    )  # fmt: skip
