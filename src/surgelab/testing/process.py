"""The scripted server as a real subprocess, for calibration, benchmarks and tests."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from surgelab.testing.child import ListeningChild

__all__ = ["ScriptedServerProcess", "scripted_server"]


class ScriptedServerProcess(ListeningChild):
    """``surgelab.testing.scripted_server`` as a child process, on a port it picked itself."""

    def __init__(self, ttft: float = 0.0, itl: float = 0.0, *, startup_timeout: float = 20.0) -> None:
        cmd = [sys.executable, "-m", "surgelab.testing.scripted_server", "--port", "0", "--ttft", str(ttft), "--itl", str(itl)]  # fmt: skip
        super().__init__(cmd, label="the scripted server", startup_timeout=startup_timeout)
        self.ttft = ttft
        self.itl = itl

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return self.root_url + "/v1"


@contextlib.contextmanager
def scripted_server(ttft: float = 0.0, itl: float = 0.0, timeout: float = 20.0) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of a scripted server subprocess."""
    with ScriptedServerProcess(ttft, itl, startup_timeout=timeout) as server:
        yield server.base_url
