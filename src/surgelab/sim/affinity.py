"""Session affinity: every request of a multi-turn session goes to the replica its session started on.

What a router that pins sessions does (by a header such as ``X-Session-ID``, ``target.session_header``
on the client side): the replica that served a session's earlier turns holds their KV blocks in its
prefix cache, so the next turn, which resends that history, is prefilled from the cache instead of
recomputed. The fleet's policy (``router.policy``) picks a session's first replica; later turns go
back to it while it is routable (up in the router's view, with room), else the policy picks again
and the session is pinned there (``moved``). Requests outside a session are the policy's alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from surgelab.sim.replica import Replica
    from surgelab.sim.request import SimRequest

__all__ = ["SessionAffinity"]


class SessionAffinity:
    """Pins sessions to replicas in front of a routing policy (``pick``)."""

    def __init__(self, pick: Callable[[], Replica | None]) -> None:
        self._policy = pick
        self._pinned: dict[int, Replica] = {}
        self.kept = self.moved = 0

    def pick(self, req: SimRequest) -> Replica | None:
        """The replica for ``req``: its session's, or the policy's choice (then its session's)."""
        session = req.meta.session
        if session < 0:
            return self._policy()
        pinned = self._pinned.get(session)
        if pinned is not None and pinned.routable():
            self.kept += 1
            return pinned
        chosen = self._policy()
        if chosen is not None:
            self.moved += pinned is not None
            self._pinned[session] = chosen
        return chosen

    def report(self) -> dict[str, int]:
        """What fleet.json says of it: sessions pinned, later requests sent to their replica, and moves."""
        return {"sessions": len(self._pinned), "kept": self.kept, "moved": self.moved}
