"""The optional retry policy (``target.retry``): which failures are retried, how long to wait, and
the budget that keeps retries from multiplying an overload.

A request is retried only while it has attempts left, its failure is one the policy names,
its body can be sent again, and the budget allows: retries so far stay within ``budget`` ×
first attempts (at least one retry is always allowed). The wait is ``base × 2^(n−1)``
capped at ``max``, and never shorter than the server's Retry-After when it gave one. The
request keeps its first send time, so its latency from the intended time includes every
attempt; the other timestamps are the last attempt's, and ``attempts`` says how many there were.
"""

from __future__ import annotations

import asyncio

from surgelab.client.transport import HttpCall, Reader, Transport
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Retry

__all__ = ["RetryBudget", "Retrier"]


class RetryBudget:
    """Counts first attempts and retries; a retry is allowed while retries < max(1, budget × firsts)."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.firsts = 0
        self.retries = 0
        self.refused = 0  # retries the budget did not allow

    def allow(self) -> bool:
        if self.retries < max(1.0, self.share * self.firsts):
            self.retries += 1
            return True
        self.refused += 1
        return False


class Retrier:
    """Sends through a transport, retrying as ``policy`` says; without a policy, one attempt."""

    def __init__(self, policy: Retry | None) -> None:
        self.policy = policy
        self.budget = RetryBudget(policy.budget if policy is not None else 0.0)

    def retryable(self, out: Outcome) -> bool:
        assert self.policy is not None
        on = self.policy.on
        if out.state is State.HTTP_ERROR:
            return out.http_status in on
        return (out.state is State.CONNECTION_ERROR and "connection_error" in on) or (
            out.state is State.TIMEOUT and "timeout" in on
        )

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        assert self.policy is not None
        backoff = self.policy.backoff
        wait = min(backoff.base * 2 ** (attempt - 1), backoff.max)
        if backoff.honour_retry_after and retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return wait

    async def exchange(
        self, transport: Transport, call: HttpCall, out: Outcome, read: Reader, at_ns: int | None = None
    ) -> None:
        self.budget.firsts += 1
        await transport.exchange(call, out, read, at_ns)
        policy = self.policy
        if policy is None:
            return
        first_sent = out.sent_ns
        while (
            out.state is not State.OK
            and out.attempts < policy.max_attempts
            and self.retryable(out)
            and self.budget.allow()
        ):
            await asyncio.sleep(self.delay(out.attempts, out.retry_after_s))
            out.reset_for_retry()
            out.attempts += 1
            await transport.exchange(call, out, read)
            out.sent_ns = first_sent
