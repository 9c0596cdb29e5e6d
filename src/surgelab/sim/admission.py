"""The fleet's admission queue: requests no replica can take yet wait here, by tier priority.

Tiers listed in ``priority`` are served first, in that order; the rest after them, each
tier first come first served. A queue at ``max_depth`` sheds: an arrival that outranks the
lowest-priority waiting request takes its place (that one is shed), otherwise the arrival
is shed. A request that waits longer than ``timeout`` is shed too. Shed requests end as
``http_error`` with the configured status (429 or 503).
"""

from __future__ import annotations

from collections import deque

from surgelab.sim.fleet import Admission
from surgelab.sim.request import SECOND, SimRequest

__all__ = ["AdmissionQueue"]


class AdmissionQueue:
    def __init__(self, cfg: Admission) -> None:
        self.cfg = cfg
        self._rank = {tier: i for i, tier in enumerate(cfg.priority)}
        self._lanes: list[deque[SimRequest]] = [deque() for _ in range(len(cfg.priority) + 1)]
        self.depth = 0
        self.timeout_ns = round(cfg.timeout * SECOND) if cfg.timeout is not None else None

    def __len__(self) -> int:
        return self.depth  # ``depth`` itself on hot paths: an attribute is cheaper than len()

    def priority_of(self, tier: str) -> int:
        return self._rank.get(tier, len(self.cfg.priority))

    def push(self, req: SimRequest) -> SimRequest | None:
        """Queue ``req``; return the request shed to make room (``req`` itself when it must go)."""
        shed = None
        if self.cfg.max_depth is not None and self.depth >= self.cfg.max_depth:
            rank = len(self._lanes)
            for rank in range(len(self._lanes) - 1, -1, -1):
                lane = self._lanes[rank]
                while lane and not lane[-1].queued:
                    lane.pop()  # left by a timeout
                if lane:
                    break
            if not self._lanes[rank] or rank <= req.priority:
                return req
            shed = self._lanes[rank].pop()
            shed.queued = False
            self.depth -= 1
        self._lanes[req.priority].append(req)
        req.queued = True
        self.depth += 1
        return shed

    def peek(self) -> SimRequest | None:
        for lane in self._lanes:
            while lane and not lane[0].queued:
                lane.popleft()  # left by a timeout
            if lane:
                return lane[0]
        return None

    def pop(self) -> SimRequest:
        req = self.peek()
        assert req is not None
        self._lanes[req.priority].popleft()
        req.queued = False
        self.depth -= 1
        return req

    def remove(self, req: SimRequest) -> bool:
        """Take a waiting request out (its timeout); lazily dropped from its lane."""
        if not req.queued:
            return False
        req.queued = False
        self.depth -= 1
        return True
