"""Start ``surgelab serve`` as a real subprocess on a free loopback port, for tests and demos.

The child is ``sys.executable -m surgelab serve``; readiness is ``GET /health`` answering
200; shutdown is SIGTERM, then SIGKILL if it has not exited within ``stop_timeout``. Every
wait is bounded. Output goes to a temporary log whose tail is quoted when startup fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence

__all__ = ["ServerProcess", "ServerStartError", "async_serve_process", "serve_process"]

HOST = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The server exited or did not become healthy in time; the message quotes its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class ServerProcess:
    """One ``surgelab serve`` child process; usable as a (sync) context manager."""

    def __init__(
        self,
        args: Sequence[str] = (),
        *,
        profile: str = "tiny",
        startup_timeout: float = 20.0,
        stop_timeout: float = 5.0,
        port: int = 0,
    ) -> None:
        self.args = [*args]
        self.requested_port = port  # 0: a free port at every start; else this one (a restart keeps it)
        self.profile = profile
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return self.root_url + "/v1"

    def start(self) -> str:
        """Start the child and wait until it is healthy; return the base URL."""
        self.port = self.requested_port or free_port()
        command = [
            sys.executable,
            "-m",
            "surgelab",
            "serve",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--profile",
            self.profile,
            *self.args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(f"surgelab serve exited with {self.process.returncode}: {self.log_tail()}")
            if self._healthy():
                return self.base_url
            time.sleep(0.05)
        self.stop()
        raise ServerStartError(f"surgelab serve not healthy after {self.startup_timeout}s: {self.log_tail()}")

    def stop(self) -> int | None:
        """Terminate (then kill) the child; return its exit status."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(self.stop_timeout)
        return proc.returncode

    def log_tail(self, limit: int = 2000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-limit:].strip()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.root_url + "/health", timeout=1.0) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def __enter__(self) -> ServerProcess:
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
        self._log.close()


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
