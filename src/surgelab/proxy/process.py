"""Start ``surgelab proxy`` as a real subprocess on a free loopback port, for tests and benchmarks.

Like ``surgelab.server.process``: the child is ``sys.executable -m surgelab proxy``;
readiness is ``GET /_proxy/health`` answering 200; shutdown is SIGTERM, then SIGKILL.
Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from surgelab.process import HOST, ChildProcess

__all__ = ["ProxyProcess", "proxy_process"]


class ProxyProcess(ChildProcess):
    """One ``surgelab proxy`` child in front of ``upstream``; a (sync) context manager."""

    label = "surgelab proxy"
    health_path = "/_proxy/health"

    def __init__(self, upstream: str, args: Sequence[str] = (), *, startup_timeout: float = 20.0, stop_timeout: float = 5.0) -> None:
        super().__init__(startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self.upstream = upstream
        self.args = [*args]

    def command(self) -> Sequence[str]:
        return ["proxy", "--listen", f"{HOST}:{self.port}", "--upstream", self.upstream, *self.args]

    def url_for(self, upstream_url: str) -> str:
        """``upstream_url`` (which starts with the upstream) as seen through the proxy."""
        origin = self.upstream.rstrip("/")
        return self.root_url + upstream_url[len(origin) :] if upstream_url.startswith(origin) else self.root_url

    def stats(self) -> dict[str, Any]:
        """What the proxy injected so far (``/_proxy/stats``)."""
        raw = self.get("/_proxy/stats")
        return json.loads(raw) if raw else {}


@contextlib.contextmanager
def proxy_process(upstream: str, args: Sequence[str] = (), **kwargs: Any) -> Iterator[ProxyProcess]:
    """``with proxy_process(server.root_url, ["--drop", "1%"]) as proxy: ... proxy.root_url + "/v1"``"""
    with ProxyProcess(upstream, args, **kwargs) as proxy:
        yield proxy
