"""Runtime of the fault knobs in ``FaultConfig``: the RNG, the timers and the stall switch.

The order a request meets them is fixed and documented: stall, rate limit, error, cold
start, latency spike. Errors and rate limits answer at once, before any engine work.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable

import numpy as np

from surgelab.server.config import FaultConfig
from surgelab.server.protocol import ApiError

__all__ = ["FaultInjector"]

CRASH_EXIT_STATUS = 1


class FaultInjector:
    """Decides, per request, which configured misbehaviour applies."""

    def __init__(self, config: FaultConfig, seed: int) -> None:
        self.config = config
        self._rng = np.random.default_rng([seed, 0xFA017])
        self._loaded: asyncio.Future[None] | None = None
        self._stalled = asyncio.Event()
        self._on_stall: list[Callable[[], None]] = []
        self._leaked: list[bytes] = []

    @property
    def stalled(self) -> bool:
        return self._stalled.is_set()

    def arm(self, on_stall: Callable[[], None]) -> None:
        """Start the crash and stall timers (call once the server is listening)."""
        loop = asyncio.get_running_loop()
        self._on_stall.append(on_stall)
        if self.config.crash_after is not None:
            loop.call_later(self.config.crash_after, self._crash)
        if self.config.stall_after is not None:
            loop.call_later(self.config.stall_after, self.stall)

    def stall(self) -> None:
        print("surgelab serve: stalling as configured (stall_after)", file=sys.stderr, flush=True)
        self._stalled.set()
        for hook in self._on_stall:
            hook()

    async def hang_if_stalled(self) -> None:
        """A stalled server accepts connections and never answers."""
        if self._stalled.is_set():
            await asyncio.Event().wait()

    def check_admission(self, inflight: int) -> None:
        """Raise the 429 or injected 5xx this request should get, if any (and leak, if told to)."""
        cfg = self.config
        if cfg.leak_per_request:
            self._leaked.append(b"\x01" * cfg.leak_per_request)  # written, so resident
        if cfg.max_inflight is not None and inflight > cfg.max_inflight:
            retry = max(1, round(cfg.retry_after))
            raise ApiError(
                429,
                f"rate limit: more than {cfg.max_inflight} requests in flight",
                type="rate_limit_exceeded",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(retry)},
            )
        if cfg.error_rate > 0 and self._rng.random() < cfg.error_rate:
            raise ApiError(
                cfg.error_status, "injected fault: internal error", type="server_error", code="injected_fault"
            )

    async def delay(self) -> None:
        """Wait out the cold start (begun by the first request) and any latency spike."""
        cfg = self.config
        if cfg.cold_start > 0:
            if self._loaded is None:
                loop = asyncio.get_running_loop()
                self._loaded = loop.create_future()
                loop.call_later(cfg.cold_start, self._loaded.set_result, None)
            await asyncio.shield(self._loaded)
        if cfg.spike_probability > 0 and self._rng.random() < cfg.spike_probability:
            await asyncio.sleep(cfg.spike_delay)

    def _crash(self) -> None:
        print("surgelab serve: crashing as configured (crash_after)", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_STATUS)
