"""First come, first served; the most recently admitted sequence is preempted (vLLM's default policy)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Generic

from surgelab.engine.schedulers.base import S

__all__ = ["FCFS"]


class FCFS(Generic[S]):
    """Requests are admitted in arrival order; a preempted one goes back to the front of the queue, and
    the victim is the last in batch order (LIFO), so the oldest sequences keep their progress."""

    name = "fcfs"

    def __init__(self) -> None:
        self._queue: deque[S] = deque()
        # the queue's own methods, bound once: the engine asks these every step
        self.add = self._queue.append
        self.requeue = self._queue.appendleft
        self.remove = self._queue.remove
        self.pop = self._queue.popleft

    def __len__(self) -> int:
        return len(self._queue)

    def peek(self) -> S:
        return self._queue[0]

    def victim(self, running: Sequence[S], first: int) -> int:
        return len(running) - 1
