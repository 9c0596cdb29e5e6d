"""The scripted server (or the lean one) as a real subprocess, for calibration, benchmarks and tests."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from surgelab.process import ListeningChild

__all__ = ["ScriptedServerProcess", "scripted_server"]


class ScriptedServerProcess(ListeningChild):
    """``surgelab.testing.scripted_server`` (or, with ``lean``, ``lean_server``) as a child process, on a port it picked."""

    def __init__(
        self, ttft: float = 0.0, itl: float = 0.0, *, startup_timeout: float = 20.0, lean: bool = False,
        extra: tuple[str, ...] = (),
    ) -> None:
        module = "surgelab.testing.lean_server" if lean else "surgelab.testing.scripted_server"
        cmd = [sys.executable, "-m", module, "--port", "0", "--ttft", str(ttft), "--itl", str(itl), *extra]
        super().__init__(cmd, label=f"the {'lean' if lean else 'scripted'} server", startup_timeout=startup_timeout)
        self.ttft = ttft
        self.itl = itl

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1`` (``https://`` when started with ``--cert``)."""
        return self.root_url + "/v1"


@contextlib.contextmanager
def scripted_server(ttft: float = 0.0, itl: float = 0.0, timeout: float = 20.0, lean: bool = False) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of a scripted (or lean) server subprocess."""
    with ScriptedServerProcess(ttft, itl, startup_timeout=timeout, lean=lean) as server:
        yield server.base_url
