"""The knee of a stepped load test: where throughput stops paying for more load.

Kneedle (V. Satopää, J. Albrecht, D. Irwin, B. Raghavan, "Finding a 'Kneedle' in a
Haystack: Detecting Knee Points in System Behavior", ICDCS Workshops 2011) in its offline
form: normalise both axes to [0, 1], take the difference curve between the normalised
curve and the diagonal, and pick the point where it is largest. For a concave, increasing
curve (throughput against offered load) that is ``y − x``; for a convex, increasing curve
(latency against offered load) it is ``x − y``, the point where latency turns up.

The two knees are computed independently and cross-checked: the report says whether they
agree (within one level) and why the chosen level is the knee, in words a reader can check
against the sweep table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from surgelab.units import format_rate

__all__ = ["Knee", "KneeResult", "kneedle", "find_knee"]

MIN_POINTS = 3  # fewer levels than this cannot show a bend
MIN_STRENGTH = 0.05  # a difference curve lower than this is a straight line plus noise


@dataclass(frozen=True)
class Knee:
    """One Kneedle knee: the index of the point and the height of the difference curve there."""

    index: int
    x: float
    y: float
    strength: float  # max of the difference curve, 0 (a straight line) to 1 (a right angle)


def _normalise(v: np.ndarray) -> np.ndarray:
    span = float(np.max(v) - np.min(v))
    return (v - np.min(v)) / span if span > 0 else np.zeros_like(v)


def kneedle(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    curve: Literal["concave", "convex"] = "concave",
    smooth: int = 0,
    min_strength: float = MIN_STRENGTH,
) -> Knee | None:
    """Offline Kneedle for an increasing curve; None when there is no bend.

    ``min_strength`` is the offline stand-in for the paper's sensitivity S: a knee whose
    difference-curve height is below it is noise on a straight line. ``smooth`` > 0 applies a centred moving average of that half-width to y first (the paper
    smooths before normalising; a sweep has few points, so the default is none).
    """
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    idx = np.flatnonzero(keep)
    xs, ys = xs[keep], ys[keep]
    if xs.size < MIN_POINTS:
        return None
    order = np.argsort(xs, kind="stable")
    xs, ys, idx = xs[order], ys[order], idx[order]
    if smooth > 0:
        kernel = np.ones(2 * smooth + 1) / (2 * smooth + 1)
        padded = np.pad(ys, smooth, mode="edge")
        ys = np.convolve(padded, kernel, mode="valid")
    xn, yn = _normalise(xs), _normalise(ys)
    diff = yn - xn if curve == "concave" else xn - yn
    best = int(np.argmax(diff))
    if diff[best] < min_strength:
        return None
    return Knee(index=int(idx[best]), x=float(xs[best]), y=float(ys[best]), strength=float(diff[best]))


@dataclass(frozen=True)
class KneeResult:
    """Which level is the knee, from throughput and from latency, and why."""

    index: int | None  # level index (into the rows given) chosen as the knee
    level: float | None  # its offered load
    throughput: Knee | None
    latency: Knee | None
    agree: bool | None  # throughput and latency knees within one level of each other
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_knee(
    offered: Sequence[float],
    achieved: Sequence[float],
    latency: Sequence[float] | None = None,
    unit: str = "",
    latency_name: str = "latency",
) -> KneeResult:
    """Kneedle on achieved vs offered load, cross-checked with the latency inflection.

    The throughput knee is the answer when there is one; the latency knee stands in when
    throughput shows no bend (e.g. a sweep that stopped before the plateau).
    """
    offered_a = np.asarray(offered, dtype=float)
    achieved_a = np.asarray(achieved, dtype=float)
    t_knee = kneedle(offered_a, achieved_a, "concave")
    l_knee = kneedle(offered_a, latency, "convex") if latency is not None else None
    if t_knee is None and l_knee is None:
        n = offered_a.size
        why = f"only {n} level(s)" if n < MIN_POINTS else "neither throughput nor latency bends over the levels run"
        return KneeResult(None, None, None, None, None, f"no knee: {why}")
    rank = {i: r for r, i in enumerate(np.argsort(offered_a, kind="stable").tolist())}
    agree = None
    if t_knee is not None and l_knee is not None:
        agree = abs(rank[t_knee.index] - rank[l_knee.index]) <= 1
    chosen = t_knee or l_knee
    assert chosen is not None
    i = chosen.index
    peak = float(np.nanmax(achieved_a))
    parts = []
    if t_knee is not None:
        parts.append(
            f"throughput bends at {offered_a[i]:g} {unit}".rstrip()
            + f": {format_rate(achieved_a[i])} req/s, {achieved_a[i] / peak:.0%} of the highest measured"
            + f" ({format_rate(peak)} req/s)"
        )
        later = [j for j in range(offered_a.size) if offered_a[j] > offered_a[i]]
        if later:
            j = min(later, key=lambda k: offered_a[k])
            gain = achieved_a[j] / achieved_a[i] - 1 if achieved_a[i] > 0 else float("nan")
            parts.append(
                f"the next level ({offered_a[j]:g}, ×{offered_a[j] / offered_a[i]:.2g} the load) adds {gain:+.0%} throughput"
            )
    else:
        parts.append("throughput shows no bend; the latency inflection stands in")
    if l_knee is not None and latency is not None:
        lat = np.asarray(latency, dtype=float)
        parts.append(f"{latency_name} turns up at {offered_a[l_knee.index]:g} ({lat[l_knee.index]:.4g} ms)")
        if agree is not None:
            parts.append("the two agree" if agree else "the two disagree by more than one level: check the table")
    return KneeResult(i, float(offered_a[i]), t_knee, l_knee, agree, "; ".join(parts))
