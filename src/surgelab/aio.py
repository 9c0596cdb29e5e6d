"""The event-loop helper: run a coroutine on uvloop when it is installed (faster sockets), else
on asyncio's loop.

Chosen per call, never by changing the global policy on import. Used by the runner, the
servers, the test helpers and the command line alike.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["run_async"]


def run_async(coro: Coroutine[Any, Any, T], use_uvloop: bool = True) -> T:
    factory = None
    if use_uvloop:
        try:
            import uvloop  # optional: faster sockets where installed, chosen per call

            factory = uvloop.new_event_loop
        except ImportError:  # pragma: no cover - uvloop is a default dependency off Windows
            factory = None
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)
    loop = factory() if factory else asyncio.new_event_loop()  # pragma: no cover
    try:  # pragma: no cover
        return loop.run_until_complete(coro)
    finally:  # pragma: no cover
        loop.close()
