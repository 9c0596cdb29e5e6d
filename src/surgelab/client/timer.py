"""Waiting for a request's send time to within microseconds rather than the event loop's millisecond.

uvloop's timers count whole milliseconds (a wake-up lands up to a millisecond early or late)
and asyncio's epoll timeout is rounded up to one, so a request sent "at its intended time"
would leave up to a millisecond off, and every latency measured from that time would carry
it. On Linux a ``timerfd`` — a kernel high-resolution timer the event loop watches like a
socket — wakes the loop on time without spending CPU: it is armed 0.05 ms early and the
rest is spent yielding to the loop (more yielding would buy the ~0.15 ms a sleeping process
takes to run again here, at a CPU cost a second worker needs). One per open client, armed
for the earliest pending send. Elsewhere the last 1.2 ms before a send are spent yielding.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import itertools
import os
import sys
import time
from collections.abc import Callable

__all__ = ["SendTimer", "SPIN_NS", "WAKE_NS"]

SPIN_NS = 1_200_000  # without a timerfd: yield to the loop for this long before a send instead of sleeping
WAKE_NS = 50_000  # with one: wake this early, then yield (short: yielding costs CPU that a second worker needs)
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class SendTimer:
    """Wakes tasks at absolute times on the monotonic clock; use ``open``/``close`` around its use."""

    def __init__(self) -> None:
        self._fd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._libc: ctypes.CDLL | None = None
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._armed: int | None = None

    def open(self) -> None:
        """Create the timerfd on the running loop (Linux); without one, ``wait_until`` spins."""
        if not sys.platform.startswith("linux"):  # pragma: no cover
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return
            libc.prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)  # let the kernel wake us within 1 µs, not 50
            loop = asyncio.get_running_loop()
            loop.add_reader(fd, self._fire)
        except (AttributeError, OSError, NotImplementedError, RuntimeError):
            return
        self._fd, self._loop, self._libc = fd, loop, libc

    def close(self) -> None:
        if self._fd >= 0:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        for _, _, waiter in self._heap:
            if not waiter.done():
                waiter.cancel()
        self._heap.clear()

    async def wait_until(self, clock: Callable[[], int], at_ns: int) -> None:
        """Return at ``at_ns`` on ``clock`` (nanoseconds), never before it."""
        left = at_ns - clock()
        if left <= 0:
            return
        if self._fd < 0:
            await _spin_until(clock, at_ns)
            return
        deadline = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + left - WAKE_NS
        waiter = self._loop.create_future()  # type: ignore[union-attr]
        heapq.heappush(self._heap, (deadline, next(self._order), waiter))
        if self._armed is None or deadline < self._armed:
            self._arm(deadline)
        await waiter
        while clock() < at_ns:
            await asyncio.sleep(0)

    def _arm(self, deadline: int) -> None:
        when = _Itimerspec(_Timespec(0, 0), _Timespec(deadline // 1_000_000_000, deadline % 1_000_000_000))
        self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(when), None)  # type: ignore[union-attr]
        self._armed = deadline

    def _fire(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._fd, 8)
        self._armed = None
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        heap = self._heap
        while heap and heap[0][0] <= now:
            waiter = heapq.heappop(heap)[2]
            if not waiter.done():
                waiter.set_result(None)
        while heap and heap[0][2].done():  # cancelled waits
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0])


async def _spin_until(clock: Callable[[], int], at_ns: int) -> None:
    while (left := at_ns - clock()) > 0:
        await asyncio.sleep((left - SPIN_NS) / 1e9 if left > SPIN_NS else 0)
