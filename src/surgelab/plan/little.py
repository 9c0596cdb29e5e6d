"""Little's Law, L = λ·W, and its closed-loop form with think time.

For an open system: requests in flight L = arrival rate λ × time in system W. For N users
who each wait W for a response and then think Z before the next request, the interactive
response-time law gives the throughput X = N ÷ (W + Z). Give any two of a triple; get the
third.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LittleResult", "solve_open", "solve_closed"]


@dataclass(frozen=True)
class LittleResult:
    rate: float  # requests per second
    latency: float  # seconds in the system (response time)
    in_flight: float  # requests in the system on average
    users: float | None = None  # closed loop: virtual users
    think: float | None = None  # closed loop: think time, seconds


def solve_open(rate: float | None = None, latency: float | None = None, in_flight: float | None = None) -> LittleResult:
    """Two of (λ, W, L) → all three."""
    given = sum(x is not None for x in (rate, latency, in_flight))
    if given != 2:
        raise ValueError("give exactly two of rate, latency and in-flight")
    if rate is None:
        if not latency:
            raise ValueError("latency must be > 0 to compute a rate")
        rate = in_flight / latency  # type: ignore[operator]
    elif latency is None:
        if not rate:
            raise ValueError("rate must be > 0 to compute a latency")
        latency = in_flight / rate  # type: ignore[operator]
    else:
        in_flight = rate * latency
    return LittleResult(rate=rate, latency=latency, in_flight=in_flight)  # type: ignore[arg-type]


def solve_closed(users: float, latency: float, think: float = 0.0) -> LittleResult:
    """N users, response time W, think time Z → throughput N ÷ (W + Z) and L = X·W in flight."""
    if users <= 0 or latency <= 0 or think < 0:
        raise ValueError("users and latency must be > 0 and think time >= 0")
    rate = users / (latency + think)
    return LittleResult(rate=rate, latency=latency, in_flight=rate * latency, users=users, think=think)
