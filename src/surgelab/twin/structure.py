"""The step-time structures a fit can choose from, and a weighted least-squares fit of each.

Every observation is one or more engine steps whose time is the profile's formula
(``EngineProfile.price``)::

    t = overhead·steps + step_s_per_seq·sequences + combine(memory, compute) [+ request_overhead_s]
    memory  = decode_base_s·steps + s_per_kv_token·(KV tokens read)
    compute = prefill_s_per_token·tokens + prefill_s_per_pair·(attention pairs)

``request_overhead_s`` (the front end's time per request, before it joins a step) is paid by
idle prefills alone: their time is from the send to the first token. It is told apart from the
step overhead by the steps that do not carry it — decode gaps and mixed steps — and held (at
the base profile's value) when it cannot be: e.g. under ``max`` when every idle prefill is one
step and no mixed step is compute-bound, its column is the step overhead's less decode_base's.

A *structure* is a choice of ``combine`` (``max`` or ``sum``) and of which optional terms it
has (prefill attention, per-sequence overhead). Under ``sum`` the time is linear in the
coefficients. Under ``max`` it is linear once each observation is assigned the part that
dominates it, so the fit alternates: assign, solve, re-assign with the solution, until no
assignment changes (at most 20 rounds from each start, below).

The solve is least squares on relative error, measured against the model's own prediction
(``(y - ŷ)/ŷ``: a gap of 0 — two tokens that arrived in one read — is a 100 % error, not an
infinite one, so it cannot pull the fit to zero), iterated from a first solve weighted by
``1/max(y, half the median of its kind)``; each kind of observation — decode gaps, idle prefills, mixed
steps — is weighted as a whole equally, however many rows it has. It is robust: Huber
reweighting, then the rows more than 5 robust standard deviations off dropped. A coefficient
whose column is (numerically) a combination of the others' is *not identifiable*: it is held at
a given value and never solved for; a negative estimate is held at 0 and the rest solved again.
Standard errors are the heteroskedasticity-robust (HC1 sandwich) ones of the final solve,
given the assignment.

Under ``max`` the assignment is searched from two starts — the physics (decode gaps
memory-bound, prefills and mixed steps compute-bound) and the additive fit's own verdict — and
of every assignment met, the one kept identifies the most coefficients and, among those, fits
best by the ``max`` formula itself. An assignment that empties the memory or the compute part
fits the rest with fewer constraints and can look better; it is taken only if no other
identifies as much.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["KINDS", "PARAMS", "Rows", "Solution", "Structure", "STRUCTURES", "solve", "stderr"]

PARAMS = ("step_overhead_s", "decode_base_s", "s_per_kv_token", "prefill_s_per_token", "prefill_s_per_pair", "step_s_per_seq",
          "request_overhead_s")  # fmt: skip
# the order coefficients are admitted in when some are confounded: the last of a confounded set is the one held
_PRIORITY = ("s_per_kv_token", "decode_base_s", "prefill_s_per_token", "prefill_s_per_pair", "step_s_per_seq", "step_overhead_s",
             "request_overhead_s")  # fmt: skip
_OPTIONAL = {"prefill_s_per_pair": "attention", "step_s_per_seq": "per_seq"}
KINDS = {0: "decode", 1: "prefill", 2: "mixed"}
_ROUNDS = 20
_HUBER = 4
_RANK_TOL = 1e-7


@dataclass(frozen=True)
class Structure:
    combine: str  # "max" or "sum"
    attention: bool = False
    per_seq: bool = False

    @property
    def name(self) -> str:
        return "+".join([self.combine] + ["attention"] * self.attention + ["per-seq"] * self.per_seq)

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(p for p in PARAMS if p not in _OPTIONAL or getattr(self, _OPTIONAL[p]))


STRUCTURES = tuple(Structure(c, a, s) for c in ("max", "sum") for a in (False, True) for s in (False, True))


@dataclass
class Rows:
    """Observations as the work they priced: per row, the steps' totals of each unit of work."""

    y: np.ndarray  # seconds
    kind: np.ndarray  # 0 decode gap, 1 idle prefill, 2 mixed step (KINDS)
    steps: np.ndarray  # steps the row spans (overhead and decode_base each paid once a step)
    seqs: np.ndarray  # sequences scheduled, summed over the steps
    kv: np.ndarray  # KV tokens read, summed
    tokens: np.ndarray  # tokens computed, summed
    pairs: np.ndarray  # prefill attention pairs, summed

    def take(self, index: np.ndarray) -> Rows:
        return Rows(*(getattr(self, f)[index] for f in ("y", "kind", "steps", "seqs", "kv", "tokens", "pairs")))

    def columns(self, structure: Structure, memory: np.ndarray) -> dict[str, np.ndarray]:
        """Each coefficient's column; under ``max`` a row carries only the part ``memory`` says dominates it."""
        on_memory = np.ones(self.y.size) if structure.combine == "sum" else memory.astype(float)
        on_compute = np.ones(self.y.size) if structure.combine == "sum" else 1.0 - on_memory
        return {
            "step_overhead_s": self.steps.astype(float), "decode_base_s": self.steps * on_memory,
            "s_per_kv_token": self.kv * on_memory, "prefill_s_per_token": self.tokens * on_compute,
            "prefill_s_per_pair": self.pairs * on_compute, "step_s_per_seq": self.seqs.astype(float),
            "request_overhead_s": (self.kind == 1).astype(float),
        }  # fmt: skip

    def predict(self, structure: Structure, values: dict[str, float]) -> np.ndarray:
        v = {p: values.get(p, 0.0) if p in structure.params else 0.0 for p in PARAMS}
        memory = v["decode_base_s"] * self.steps + v["s_per_kv_token"] * self.kv
        compute = v["prefill_s_per_token"] * self.tokens + v["prefill_s_per_pair"] * self.pairs
        both = memory + compute if structure.combine == "sum" else np.maximum(memory, compute)
        front = v["request_overhead_s"] * (self.kind == 1)
        return v["step_overhead_s"] * self.steps + v["step_s_per_seq"] * self.seqs + both + front

    def memory_bound(self, values: dict[str, float]) -> np.ndarray:
        memory = values.get("decode_base_s", 0.0) * self.steps + values.get("s_per_kv_token", 0.0) * self.kv
        compute = values.get("prefill_s_per_token", 0.0) * self.tokens + values.get("prefill_s_per_pair", 0.0) * self.pairs
        return memory >= compute


@dataclass
class Solution:
    structure: Structure
    values: dict[str, float]  # every coefficient of the structure
    solved: list[str]  # the coefficients solved for (the rest held)
    cov: np.ndarray  # their covariance (HC1), in ``solved`` order
    held: dict[str, str]  # coefficient → why it was not solved: "confounded with …"
    negative: dict[str, tuple[float, float]] = field(default_factory=dict)  # clamped: (estimate, s.e.)
    memory: np.ndarray = field(default_factory=lambda: np.empty(0, bool))  # the final assignment (max)
    kept: np.ndarray = field(default_factory=lambda: np.empty(0, bool))  # rows left after trimming


def _weights(rows: Rows, scale: np.ndarray) -> np.ndarray:
    """Row weights for relative error against ``scale`` (s), each kind weighted as a whole equally."""
    w = 1.0 / np.maximum(scale, 1e-9)
    for k in KINDS:
        mine = rows.kind == k
        if mine.any():
            w[mine] /= np.sqrt(mine.sum())
    return w


def _floor(rows: Rows, fraction: float) -> np.ndarray:
    """Per row, ``fraction`` of the median time of its kind: the least a row's error is measured against."""
    floor = np.empty(rows.y.size)
    for k in KINDS:
        mine = rows.kind == k
        if mine.any():
            floor[mine] = fraction * float(np.median(rows.y[mine]))
    return np.maximum(floor, 1e-9)


def _identifiable(cols: dict[str, np.ndarray], names: list[str], w: np.ndarray) -> tuple[list[str], dict[str, str]]:
    """The coefficients that can be solved for, in priority order, and why each other one cannot."""
    kept: list[str] = []
    basis = np.empty((w.size, 0))
    held: dict[str, str] = {}
    for name in [p for p in _PRIORITY if p in names]:
        col = cols[name] * w
        norm = np.linalg.norm(col)
        if norm == 0:
            held[name] = "no observation carries it"
            continue
        unit = col / norm
        rest = unit - basis @ (basis.T @ unit) if basis.shape[1] else unit
        if np.linalg.norm(rest) < _RANK_TOL:
            coef = np.linalg.lstsq(np.stack([cols[k] * w for k in kept], 1), col, rcond=None)[0]
            scale = np.array([np.linalg.norm(cols[k] * w) for k in kept])
            weight = np.abs(coef) * scale
            mates = [k for k, x in zip(kept, weight) if x > 1e-6 * max(weight.max(), 1e-300)]
            held[name] = "confounded with " + ", ".join(mates)
            continue
        kept.append(name)
        basis = np.column_stack([basis, rest / np.linalg.norm(rest)])
    return kept, held


def _lstsq(cols, names, fixed, rows, w):
    """Weighted least squares for ``names`` with ``fixed`` subtracted; (θ, HC1 covariance, residual)."""
    y = rows.y - sum((cols[k] * v for k, v in fixed.items()), np.zeros(rows.y.size))
    if not names:
        return np.empty(0), np.empty((0, 0)), y * w
    x = np.stack([cols[k] for k in names], 1) * w[:, None]
    yw = y * w
    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    theta_s, *_ = np.linalg.lstsq(x / scale, yw, rcond=None)
    theta = theta_s / scale
    resid = yw - x @ theta
    n, p = x.shape
    try:
        bread = np.linalg.inv((x / scale).T @ (x / scale))
        meat = (x / scale).T @ ((resid**2)[:, None] * (x / scale))
        cov = bread @ meat @ bread * (n / max(n - p, 1)) / np.outer(scale, scale)
    except np.linalg.LinAlgError:
        cov = np.full((p, p), np.nan)
    return theta, cov, resid


def _solve_assigned(rows, structure, memory, held_values, w, pinned=None):
    cols = rows.columns(structure, memory)
    names, why = _identifiable(cols, [p for p in structure.params if p not in (pinned or {})], w)
    why.update(pinned or {})
    fixed = {k: held_values[k] for k in why}
    negative: dict[str, tuple[float, float]] = {}
    while True:
        theta, cov, resid = _lstsq(cols, names, fixed, rows, w)
        se = np.sqrt(np.maximum(np.diag(cov), 0.0))
        worst = int(np.argmin(theta)) if theta.size else -1
        if worst < 0 or theta[worst] >= 0:
            break
        name = names.pop(worst)  # the most negative: held at 0, the rest solved again
        negative[name] = (float(theta[worst]), float(se[worst]))
        fixed[name] = 0.0
    values = {**fixed, **dict(zip(names, map(float, theta)))}
    return values, (names, cov), why, negative, resid


def _carried(rows: Rows, structure: Structure, memory: np.ndarray) -> int:
    """How many of the structure's coefficients some row carries under the assignment ``memory``."""
    return sum(bool(np.any(col)) for name, col in rows.columns(structure, memory).items() if name in structure.params)


def _assigned(rows: Rows, structure: Structure, held_values: dict[str, float], w: np.ndarray):
    """Solve, re-assigning each row to the part that dominates it (``max``) until the assignment holds.

    From each start (the physics, and the additive fit's verdict), every round's solution is a
    candidate; the one kept leaves the fewest coefficients unidentified, then has the lowest
    weighted loss of the ``max`` formula itself (not of the linear model of its assignment).
    """
    physics = rows.kind == 0  # decode gaps memory-bound, prefills and mixed steps compute-bound
    # the front end's time is solved for only if the physics' assignment identifies it: an assignment that
    # calls some idle prefills memory-bound could tell it from the prefill slope where the records cannot
    front = _identifiable(rows.columns(structure, physics), list(structure.params), w)[1]
    pinned = {k: v for k, v in front.items() if k == "request_overhead_s"}
    if structure.combine == "sum":
        values, se, why, negative, _ = _solve_assigned(rows, structure, physics, held_values, w, pinned)
        return values, se, why, negative
    additive = Structure("sum", structure.attention, structure.per_seq)
    starts = [physics, rows.memory_bound(_solve_assigned(rows, additive, physics, held_values, w, pinned)[0])]
    seen, tried = [], set()
    for memory in starts:
        for _ in range(_ROUNDS):
            key = memory.tobytes()
            if key in tried:
                break
            tried.add(key)
            values, se, why, negative, _ = _solve_assigned(rows, structure, memory, held_values, w, pinned)
            loss = float(np.sum((w * (rows.y - rows.predict(structure, values))) ** 2))
            seen.append(((-_carried(rows, structure, memory), len(why), loss), (values, se, why, negative)))
            memory = rows.memory_bound(values)
    return min(seen, key=lambda s: s[0])[1]


def _relative(rows: Rows, structure: Structure, values: dict[str, float], floor: np.ndarray):
    """Each row's prediction, its relative error against it, and a robust estimate of that error's spread (1.4826 × MAD)."""
    scale = np.maximum(rows.predict(structure, values), floor)
    rel = (rows.y - scale) / scale
    return scale, rel, max(1.4826 * float(np.median(np.abs(rel - np.median(rel)))), 1e-9)


def solve(rows: Rows, structure: Structure, held_values: dict[str, float]) -> Solution:
    """Fit ``structure`` to ``rows``; ``held_values`` are the values of coefficients that cannot be solved for.

    Robustly: a few rounds of Huber reweighting (a row's weight falls as 1/|error| beyond 1.345
    robust standard deviations), then the rows beyond 5 are dropped and the rest solved plainly:
    a step that shared its time with something the records do not show cannot drag the fit.
    """
    # the first solve measures each row against what was observed, but never against less than half the median of
    # its kind (so a gap of 0 weighs at most twice a typical one); every later one against the fit's own prediction
    floor = _floor(rows, 1e-3)
    values, *_ = _assigned(rows, structure, held_values, _weights(rows, np.maximum(rows.y, _floor(rows, 0.5))))
    for _ in range(_HUBER):
        scale, rel, sigma = _relative(rows, structure, values, floor)
        huber = np.minimum(1.0, 1.345 * sigma / np.maximum(np.abs(rel), 1e-300))
        values, *_ = _assigned(rows, structure, held_values, _weights(rows, scale) * np.sqrt(huber))
    scale, rel, sigma = _relative(rows, structure, values, floor)
    kept = np.abs(rel) <= 5 * sigma
    sub = rows.take(kept)
    values, se, why, negative = _assigned(sub, structure, held_values, _weights(sub, scale[kept]))
    memory = np.ones(rows.y.size, bool) if structure.combine == "sum" else rows.memory_bound(values)
    return Solution(structure, values, se[0], se[1], why, negative, memory, kept)


def stderr(solution: Solution, weights: dict[str, float]) -> float | None:
    """The standard error of a sum of solved coefficients (``weights`` per name); None if any is not solved."""
    if any(k not in solution.solved for k in weights):
        return None
    g = np.array([weights.get(k, 0.0) for k in solution.solved])
    return float(np.sqrt(max(g @ solution.cov @ g, 0.0)))
