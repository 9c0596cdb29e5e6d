"""One module per request kind: each builds the HTTP call from a spec and reads the response.

Which module serves which kind is its spec's ``adapter`` (``surgelab.kinds``); a flow has none:
it is a chain of other kinds' requests, which the client sends one after another (``client/openai.py``).
"""

from __future__ import annotations

from surgelab.client.kinds.base import Kind, KindContext
from surgelab.kinds import KINDS

__all__ = ["Kind", "KindContext", "build_kinds"]


def build_kinds(ctx: KindContext) -> dict[str, Kind]:
    """An adapter for every registered kind that has one."""
    return {spec.name: spec.hook("adapter")(ctx) for spec in KINDS if spec.adapter is not None}
