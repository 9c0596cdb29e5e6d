"""Runs the clock-agnostic engine in wall time and hands each request its tokens.

Loop: step the engine, let the step's duration pass, deliver what the step emitted. Steps
shorter than the event loop's timer resolution are coalesced: their durations accumulate
against a deadline and the driver sleeps once the debt is worth a timer, so a near-zero
profile runs as fast as the CPU allows while a real profile keeps real time on average.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from surgelab.engine import Engine, EngineRequest, StepResult, step_batch

__all__ = ["EngineDriver", "TokenStream"]


class TokenStream:
    """Tokens for one request as the engine emits them."""

    __slots__ = ("request_id", "_queue")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self._queue: asyncio.Queue[int] = asyncio.Queue()

    async def receive(self) -> tuple[int, bool]:
        """Wait for tokens; return how many arrived and whether the request is finished."""
        tokens, finished = 0, False
        item = await self._queue.get()
        while True:
            if item < 0:
                finished = True
            else:
                tokens += item
            if self._queue.empty():
                return tokens, finished
            item = self._queue.get_nowait()

    def _put(self, item: int) -> None:
        self._queue.put_nowait(item)


class EngineDriver:
    """Owns an ``Engine`` and steps it on the running event loop."""

    def __init__(
        self,
        engine: Engine,
        *,
        on_step: Callable[[StepResult], None] | None = None,
        coalesce_s: float = 0.002,
        max_lag_s: float = 0.05,
    ) -> None:
        self.engine = engine
        self._on_step = on_step
        self._coalesce_s = coalesce_s
        self._max_lag_s = max_lag_s
        self._streams: dict[str, TokenStream] = {}
        self._wake = asyncio.Event()
        self._frozen = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="engine-driver")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def submit(self, request: EngineRequest) -> TokenStream:
        """Queue ``request`` (RequestRejected if it can never run) and return its stream."""
        self.engine.add(request)
        stream = TokenStream(request.request_id)
        self._streams[request.request_id] = stream
        self._wake.set()
        return stream

    def cancel(self, request_id: str) -> None:
        """Forget a request whose client went away."""
        if self._streams.pop(request_id, None) is not None:
            self.engine.abort(request_id)

    def freeze(self) -> None:
        """Stop stepping for good (the stall fault): no more tokens for anyone."""
        self._frozen.set()
        self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        while not self._frozen.is_set():
            if not self.engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
                continue
            results, spent = step_batch(self.engine, self._coalesce_s, ahead_s=deadline - loop.time(), clock=loop.time)
            deadline += spent
            if not results:  # defensive: nothing could be scheduled, wait for a change
                self._wake.clear()
                await self._wake.wait()
                continue
            now = loop.time()
            if deadline - now >= self._coalesce_s:
                await asyncio.sleep(deadline - now)
            else:
                deadline = max(deadline, now - self._max_lag_s)
                await asyncio.sleep(0)
            if self._frozen.is_set():
                break
            for result in results:
                self._deliver(result)
        await asyncio.Event().wait()  # frozen: hold every stream open, forever

    def _deliver(self, result: StepResult) -> None:
        streams = self._streams
        for rid, n in result.emitted.items():
            stream = streams.get(rid)
            if stream is not None:
                stream._put(n)
        for rid in result.finished:
            stream = streams.pop(rid, None)
            if stream is not None:
                stream._put(-1)
        if self._on_step is not None:
            self._on_step(result)
