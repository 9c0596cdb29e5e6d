"""M/M/c (Erlang C): how long requests wait for one of ``c`` servers, before any test is run.

Poisson arrivals at rate λ, exponential service of mean S (μ = 1/S), ``c`` identical
servers, one FIFO queue. With offered load a = λ·S (Erlangs) and utilisation ρ = a / c < 1:

* probability of waiting, Erlang's C formula (L. Kleinrock, *Queueing Systems, Vol. 1:
  Theory*, Wiley 1975, §3.5, eq. 3.40; D. Gross, C. M. Harris, *Fundamentals of Queueing
  Theory*, 3rd ed., Wiley 1998, §2.3):
  ``C(c, a) = (a^c / c!) · c/(c − a)  ÷  (Σ_{k<c} a^k/k! + (a^c / c!) · c/(c − a))``
* mean wait in queue ``Wq = C · S / (c − a)``; mean response ``W = Wq + S``;
  queue length ``Lq = λ·Wq``; ``P(wait > t) = C · exp(−(c − a)·t / S)``.

C is computed through the Erlang B recursion ``B_k = a·B_{k−1} / (k + a·B_{k−1})``,
``C = c·B_c / (c − a·(1 − B_c))``, which never forms a^c or c! (no overflow at c = 1000).
For an LLM server a "server" is one slot of the running batch only roughly: batching makes
service time depend on the load, which is why a plan from a sweep reports how far the
measurement departs from this estimate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["MMc", "erlang_c", "mmc", "servers_for_wait"]

MAX_SERVERS = 100_000


def _check(rate: float, service_time: float) -> None:
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"arrival rate must be a finite number > 0, got {rate!r}")
    if not (math.isfinite(service_time) and service_time > 0):
        raise ValueError(f"service time must be a finite number > 0, got {service_time!r}")


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits, for ``servers`` servers and ``offered`` Erlangs (< servers)."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    return servers * b / (servers - offered * (1 - b))


@dataclass(frozen=True)
class MMc:
    """Erlang C results; times in seconds. ``stable`` is False when ρ >= 1 (the queue grows without bound)."""

    rate: float
    service_time: float
    servers: int
    offered_erlangs: float
    utilisation: float
    stable: bool
    p_wait: float
    mean_wait: float  # Wq, inf when unstable
    mean_response: float  # Wq + S
    mean_queue: float  # Lq
    saturation_rate: float  # c / S: the throughput ceiling

    def p_wait_longer(self, t: float) -> float:
        """P(wait > t)."""
        if not self.stable:
            return 1.0
        return self.p_wait * math.exp(-(self.servers - self.offered_erlangs) * t / self.service_time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mmc(rate: float, service_time: float, servers: int) -> MMc:
    """Erlang C for λ = ``rate``/s, mean service ``service_time`` s, ``servers`` servers."""
    _check(rate, service_time)
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    a = rate * service_time
    rho = a / servers
    if rho >= 1:
        inf = math.inf
        return MMc(rate, service_time, servers, a, rho, False, 1.0, inf, inf, inf, servers / service_time)
    c = erlang_c(servers, a)
    wq = c * service_time / (servers - a)
    return MMc(rate, service_time, servers, a, rho, True, c, wq, wq + service_time, rate * wq, servers / service_time)


def servers_for_wait(rate: float, service_time: float, target_wait: float) -> MMc:
    """The fewest servers whose mean wait in queue is at most ``target_wait`` seconds."""
    _check(rate, service_time)
    if not (math.isfinite(target_wait) and target_wait >= 0):
        raise ValueError(f"target wait must be a finite number >= 0, got {target_wait!r}")
    a = rate * service_time
    c = max(1, math.floor(a) + 1)
    while c <= MAX_SERVERS:
        result = mmc(rate, service_time, c)
        if result.mean_wait <= target_wait or (target_wait == 0 and result.p_wait < 1e-12):
            return result
        c += 1
    raise ValueError(f"more than {MAX_SERVERS:,} servers needed; check the rate and the service time")
