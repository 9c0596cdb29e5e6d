"""The abort guard: stops a run that has started hurting its target (``guards.abort``).

It sees every recorded request (an ``Observer``) and keeps the last ``window`` seconds of
them: when the first ``all_failed`` requests all failed, when failures run ``consecutive_failures``
long, when the window's error rate passes ``error_rate``, or when its P99 TTFT or E2E passes ``p99_over_slo`` × the SLO, it asks the
run to stop with a reason that starts ``aborted: guard``. Dropped and cancelled requests
never count (the target did not answer them). Warm-up requests count: a target that falls
over during the warm-up is falling over.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.record import FAILED_STATES, Outcome, State
from surgelab.metrics.store import RecordMeta
from surgelab.scenario.model import Abort, Slo
from surgelab.units import SECOND

__all__ = ["AbortGuard", "GUARD_PREFIX"]

GUARD_PREFIX = "aborted: guard"


class AbortGuard:
    def __init__(self, abort: Abort, slo: Slo, stop: Callable[[str], None], clock: Callable[[], int]) -> None:
        self.abort, self.slo, self.stop, self.clock = abort, slo, stop, clock
        self.consecutive = 0
        self.succeeded = False  # any request ended well so far
        self.recent: deque[tuple[int, bool]] = deque()  # (end, failed) over the window
        self.ttft: deque[float] = deque()  # felt latencies in s, NaN when failed; in step with recent (p99_over_slo)
        self.e2e: deque[float] = deque()
        self.failures = 0  # failed among recent, kept as rows come and go: no pass over the window
        self.tripped: str | None = None
        self._checked_at = 0

    def observe(self, meta: RecordMeta, out: Outcome) -> None:
        if self.tripped is not None or out.state in (State.DROPPED, State.CANCELLED):
            return
        failed = out.state in FAILED_STATES
        self.consecutive = self.consecutive + 1 if failed else 0
        self.succeeded = self.succeeded or not failed
        limit = self.abort.consecutive_failures
        if limit is not None and self.consecutive >= limit:
            self._trip(f"{self.consecutive} consecutive failures (guards.abort.consecutive_failures: {limit})")
            return
        first_failures = self.abort.all_failed
        if failed and not self.succeeded and first_failures is not None and self.consecutive >= first_failures:
            why = (out.error or out.state.value).splitlines()[0][:200]
            self._trip(f"the first {self.consecutive} requests all failed (guards.abort.all_failed: {first_failures}); the last: {why}")
            return
        now = self.clock()
        self.recent.append((now, failed))
        if self.abort.p99_over_slo is not None:  # latencies are kept only for the condition that reads them
            self.ttft.append((out.first_token_ns - meta.intended_ns) / SECOND if out.first_token_ns is not None and not failed else np.nan)
            self.e2e.append((out.end_ns - meta.intended_ns) / SECOND if out.end_ns is not None and not failed else np.nan)
        self.failures += failed
        if now - self._checked_at >= SECOND // 4:  # the window's figures, four times a second at most
            self._checked_at = now
            self._check_window(now)

    def _check_window(self, now: int) -> None:
        horizon = now - int(self.abort.window * SECOND)
        latencies = self.abort.p99_over_slo is not None
        while self.recent and self.recent[0][0] < horizon:
            self.failures -= self.recent.popleft()[1]
            if latencies:
                self.ttft.popleft()
                self.e2e.popleft()
        n = len(self.recent)
        if n < self.abort.min_requests:
            return
        rate = self.failures / n
        if self.abort.error_rate is not None and rate >= self.abort.error_rate:
            self._trip(f"error rate {rate:.1%} over the last {self.abort.window:g}s (guards.abort.error_rate: {self.abort.error_rate:.1%})")
            return
        factor = self.abort.p99_over_slo
        if factor is None:
            return
        for name, column, bound in (("ttft", self.ttft, self.slo.ttft), ("e2e", self.e2e, self.slo.e2e)):
            if not bound:
                continue
            values = np.fromiter(column, float, n)
            values = values[~np.isnan(values)]
            if values.size >= self.abort.min_requests:
                p99 = float(np.percentile(values, 99))
                if p99 > factor * bound:
                    self._trip(f"P99 {name} {p99 * 1000:.0f} ms is over {factor:g} × its SLO of {bound * 1000:.0f} ms (guards.abort.p99_over_slo)")
                    return

    def _trip(self, why: str) -> None:
        self.tripped = f"{GUARD_PREFIX}: {why}"
        self.stop(self.tripped)

    def update(self, snapshot: LiveSnapshot) -> None:
        pass
