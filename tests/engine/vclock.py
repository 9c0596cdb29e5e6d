"""A minimal virtual-time driver for engine tests: arrivals in, per-request timings out."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from surgelab.engine import Engine, EngineRequest


@dataclass
class Trace:
    added: dict[str, float] = field(default_factory=dict)
    first: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    busy_area: float = 0.0
    """Integral over time of the engine's running + waiting gauges."""
    max_waiting: int = 0
    max_running: int = 0
    preempted: int = 0
    elapsed: float = 0.0

    def ttft(self) -> list[float]:
        return [self.first[i] - self.added[i] for i in self.first]

    def latency(self) -> list[float]:
        return [self.end[i] - self.added[i] for i in self.end]


def simulate(
    engine: Engine,
    arrivals: Iterable[tuple[float, EngineRequest]] = (),
    *,
    refill: Callable[[float], EngineRequest] | None = None,
    until: float = float("inf"),
    max_steps: int = 200_000,
    emitted_at: list[tuple[float, int]] | None = None,
) -> Trace:
    """Step ``engine`` in virtual time; ``refill`` closes the loop (a new request per finish)."""
    pending = deque(sorted(arrivals, key=lambda a: a[0]))
    trace, now = Trace(), 0.0

    def add(request: EngineRequest) -> None:
        engine.add(request)
        trace.added[request.request_id] = now

    for _ in range(max_steps):
        while pending and pending[0][0] <= now:
            add(pending.popleft()[1])
        if now >= until:
            break
        if not engine.has_work:
            if not pending:
                break
            now = pending[0][0]
            continue
        in_system = engine.num_running + engine.num_waiting
        result = engine.step()
        trace.busy_area += in_system * result.duration
        now += result.duration
        trace.max_waiting = max(trace.max_waiting, result.num_waiting)
        trace.max_running = max(trace.max_running, result.num_running)
        trace.preempted += len(result.preempted)
        for rid, n in result.emitted.items():
            trace.first.setdefault(rid, now)
            trace.tokens[rid] = trace.tokens.get(rid, 0) + n
        if emitted_at is not None:
            emitted_at.append((now, sum(result.emitted.values())))
        for rid in result.finished:
            trace.end[rid] = now
            if refill is not None:
                add(refill(now))
    else:
        raise AssertionError(f"simulation did not finish in {max_steps} steps")
    trace.elapsed = now
    return trace
