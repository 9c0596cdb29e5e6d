"""Start ``surgelab serve`` as a real subprocess on a free loopback port, for tests and demos.

The child is ``sys.executable -m surgelab serve``; readiness is ``GET /health`` answering
200; shutdown is SIGTERM, then SIGKILL if it has not exited within ``stop_timeout``. Every
wait is bounded. Output goes to a temporary log whose tail is quoted when startup fails.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence

from surgelab.process import HOST, ChildProcess, ChildStartError, free_port

__all__ = ["ServerProcess", "ServerStartError", "async_serve_process", "serve_process", "free_port", "HOST"]


ServerStartError = ChildStartError


class ServerProcess(ChildProcess):
    """One ``surgelab serve`` child process; usable as a (sync) context manager."""

    label = "surgelab serve"

    def __init__(
        self,
        args: Sequence[str] = (),
        *,
        profile: str = "tiny",
        startup_timeout: float = 20.0,
        stop_timeout: float = 5.0,
        port: int = 0,
    ) -> None:
        super().__init__(startup_timeout=startup_timeout, stop_timeout=stop_timeout, port=port)
        self.args = [*args]
        self.profile = profile

    def command(self) -> Sequence[str]:
        return ["serve", "--host", HOST, "--port", str(self.port), "--profile", self.profile, *self.args]

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return self.root_url + "/v1"

    @property
    def ready_url(self) -> str:
        return self.base_url


@contextlib.contextmanager
def serve_process(
    args: Sequence[str] = (), *, profile: str = "tiny", startup_timeout: float = 20.0, stop_timeout: float = 5.0
) -> Iterator[str]:
    """``with serve_process(["--error-rate", "1%"]) as base_url: ...``"""
    with ServerProcess(args, profile=profile, startup_timeout=startup_timeout, stop_timeout=stop_timeout) as server:
        yield server.base_url


@contextlib.asynccontextmanager
async def async_serve_process(
    args: Sequence[str] = (), *, profile: str = "tiny", startup_timeout: float = 20.0, stop_timeout: float = 5.0
) -> AsyncIterator[str]:
    """The same, for async code: the blocking start and stop run in a worker thread."""
    server = ServerProcess(args, profile=profile, startup_timeout=startup_timeout, stop_timeout=stop_timeout)
    await asyncio.to_thread(server.start)
    try:
        yield server.base_url
    finally:
        await asyncio.to_thread(server.__exit__)
