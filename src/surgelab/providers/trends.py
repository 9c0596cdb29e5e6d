"""What a history says: P90 by hour of day, 7-day volatility, error rates, week-on-week regressions.

Definitions (the seed's, made exact):

* **window**: the ``days`` (7) days ending at ``now`` — by default the latest sample, so a
  history is judged as of its last measurement, not of the moment someone reads it;
* **P90 by hour of day**: samples grouped by the local hour they were taken (``tz``); per
  hour the median and the maximum of the samples' E2E P90; hours in the ``peak`` window
  (9–11 by default) are flagged;
* **peak P90**: per calendar day, the mean of the peak hours' sample P90s; the worst day counts;
* **volatility**: coefficient of variation (sample std ÷ mean) of the rounds' output tokens
  per second in the window — with a closed-loop probe scenario this tracks the provider's
  speed (an open loop at a fixed rate measures the offered rate instead);
* **regression**: against the ``days`` before the window, median P90 or median throughput
  worse by more than ``tolerance`` (20 %), or an error rate up by more than that and by at
  least 0.1 percentage points.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from surgelab.providers.history import History, HistoryError, Sample
from surgelab.providers.measured import Measured

__all__ = ["HourStat", "Change", "TargetTrend", "HistoryReport", "analyse", "history_metrics", "zone"]

DAY = 86400.0


@dataclass(frozen=True)
class HourStat:
    hour: int
    samples: int
    p90_median_ms: float | None
    p90_max_ms: float | None
    peak: bool


@dataclass(frozen=True)
class Change:
    metric: str
    this_window: float | None
    previous: float | None
    change: float | None  # relative, + is worse
    regressed: bool


@dataclass
class TargetTrend:
    target: str
    samples: int
    hours: list[HourStat]
    volatility: float | None
    throughput_mean: float | None
    error_rate: float | None
    peak_p90_ms: float | None
    peak_day: str | None
    changes: list[Change] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.regressed]


@dataclass
class HistoryReport:
    as_of: float
    tz: str
    peak: tuple[int, int]
    days: float
    targets: list[TargetTrend]


def zone(name: str | None) -> tzinfo:
    """A time zone by IANA name; None: this machine's local zone."""
    if name is None:
        return datetime.now().astimezone().tzinfo or timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise HistoryError(f"unknown time zone {name!r} (an IANA name such as UTC or Asia/Shanghai)") from None


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _rate(rows: list[Sample]) -> float | None:
    done = sum(s.ok + s.failed for s in rows)
    return sum(s.failed for s in rows) / done if done else None


def _cv(values: list[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) <= 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def _change(
    metric: str, now: float | None, before: float | None, tolerance: float, higher_is_worse: bool = True
) -> Change:
    if now is None or before is None:
        return Change(metric, now, before, None, False)
    if metric == "error_rate":
        delta = now - before
        rel = delta / before if before else (float("inf") if delta > 0 else 0.0)
        return Change(metric, now, before, rel, delta >= 0.001 and rel > tolerance)
    rel = (now - before) / before if before else 0.0
    rel = rel if higher_is_worse else -rel
    return Change(metric, now, before, rel, rel > tolerance)


def _trend(
    target: str, rows: list[Sample], previous: list[Sample], tz: tzinfo, peak: tuple[int, int], tolerance: float
) -> TargetTrend:
    by_hour: dict[int, list[float | None]] = defaultdict(list)
    peak_days: dict[str, list[float]] = defaultdict(list)
    for s in rows:
        local = datetime.fromtimestamp(s.ts, tz)
        by_hour[local.hour].append(s.e2e_p90_ms)
        if peak[0] <= local.hour < peak[1] and s.e2e_p90_ms is not None:
            peak_days[local.date().isoformat()].append(s.e2e_p90_ms)
    hours = []
    for hour in range(24):
        values = [v for v in by_hour.get(hour, []) if v is not None]
        hours.append(HourStat(hour, len(by_hour.get(hour, [])), _median(values), max(values) if values else None,
                              peak[0] <= hour < peak[1]))  # fmt: skip
    day_means = {day: statistics.fmean(v) for day, v in peak_days.items()}
    worst = max(day_means, key=lambda d: day_means[d]) if day_means else None
    speeds = [s.output_tokens_per_s for s in rows if s.output_tokens_per_s is not None]
    changes = [
        _change("e2e_p90_ms", _median([s.e2e_p90_ms for s in rows]), _median([s.e2e_p90_ms for s in previous]), tolerance),
        _change("output_tokens_per_s", _median(list(speeds)), _median([s.output_tokens_per_s for s in previous]), tolerance, False),
        _change("error_rate", _rate(rows), _rate(previous), tolerance),
    ]  # fmt: skip
    return TargetTrend(target, len(rows), hours, _cv(speeds), statistics.fmean(speeds) if speeds else None, _rate(rows),
                       day_means[worst] if worst else None, worst, changes)  # fmt: skip


def analyse(db: History, *, now: float | None = None, tz: str | None = None, peak: tuple[int, int] = (9, 11),
            days: float = 7.0, tolerance: float = 0.2) -> HistoryReport:  # fmt: skip
    """The report of ``surgelab history``, as of ``now`` (default: the latest sample)."""
    as_of = now if now is not None else db.latest_ts()
    if as_of is None:
        raise HistoryError(f"{db.path}: no samples yet (run surgelab monitor first)")
    zone_info = zone(tz)
    end = as_of + 1e-6  # the latest sample belongs to the window
    since, before = end - days * DAY, end - 2 * days * DAY
    trends = []
    for target in db.targets():
        rows = db.samples(target, since=since, until=end)
        if rows:
            trends.append(
                _trend(target, rows, db.samples(target, since=before, until=since), zone_info, peak, tolerance)
            )
    return HistoryReport(as_of, str(zone_info), peak, days, trends)


def history_metrics(db: History, **options: Any) -> dict[str, dict[str, Measured]]:
    """The requirement metrics of each target (``volatility_7d``, ``peak_p90`` …) with their method."""
    report = analyse(db, **options)
    src, span = (
        str(db.path),
        f"{report.days:g} days to {datetime.fromtimestamp(report.as_of, timezone.utc):%Y-%m-%d %H:%M} UTC",
    )
    out = {}
    for t in report.targets:
        peak = f"{report.peak[0]}–{report.peak[1]} h"
        cv = f"CV of output tokens/s over {t.samples} rounds, {span}"
        if t.volatility is None:
            cv = f"a CV needs at least 2 rounds with throughput; {t.samples} in {span}"
        at_peak = f"worst day's mean P90 within {peak} {report.tz} ({t.peak_day}), {span}"
        if t.peak_p90_ms is None:
            at_peak = f"no successful round within {peak} ({report.tz}) in {span}"
        out[t.target] = {
            "volatility_7d": Measured(t.volatility, src, cv),
            "peak_p90": Measured(None if t.peak_p90_ms is None else t.peak_p90_ms / 1000, src, at_peak),
            "history_error_rate": Measured(t.error_rate, src, f"failed ÷ finished over {t.samples} rounds, {span}"),
            "regressions": Measured(float(len(t.regressions)), src,
                                    "; ".join(f"{c.metric} {c.change:+.0%}" for c in t.regressions) or "none vs the previous week"),
        }  # fmt: skip
    return out
