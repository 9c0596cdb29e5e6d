"""What a router believes of one target's health: the one state machine of live and simulated routing.

A target (a named target of ``surgelab run``, a replica of ``surgelab simulate``) is taken out
after ``failures`` consecutive failures, from health checks *and* requests alike, and comes back
after ``recovery`` consecutive passing checks; a request that succeeds ends a streak of failures.
It knows no clock: the caller says when (``now_s``) and when the failing check started or the
failing request was sent (``began_s``, the streak's first failure: when the target was already failing).
"""

from __future__ import annotations

__all__ = ["HealthState"]


class HealthState:
    __slots__ = ("failures_to_out", "recovery", "up", "failures", "passes", "streak_started_s", "first_failure_s")

    def __init__(self, failures: int, recovery: int) -> None:
        self.failures_to_out, self.recovery = failures, recovery
        self.reset()

    def reset(self) -> None:
        """Up, with no streak (a target that comes up new)."""
        self.up = True
        self.failures = 0  # consecutive, checks or requests
        self.passes = 0  # consecutive passing checks while out
        self.streak_started_s: float | None = None
        self.first_failure_s: float | None = None

    def failed(self, now_s: float, began_s: float) -> bool:
        """A failed check (started at ``began_s``) or request (sent then); True when this one takes the target out."""
        if self.failures == 0:
            self.streak_started_s, self.first_failure_s = now_s, began_s
        self.first_failure_s = min(began_s, self.first_failure_s if self.first_failure_s is not None else began_s)
        self.failures += 1
        self.passes = 0
        if self.up and self.failures >= self.failures_to_out:
            self.up = False
            return True
        return False

    def passed(self, from_check: bool) -> bool:
        """A passing check or a successful request; True when this one brings the target back (only checks do).

        A request that got through while the target is out says nothing of it (it was sent before).
        """
        if not self.up and not from_check:
            return False
        self.failures = 0
        if self.up:
            return False
        self.passes += 1
        if self.passes >= self.recovery:
            self.up, self.passes = True, 0
            return True
        return False
