"""A surgelab command as a real child process on a free loopback port, ready when its health
URL answers 200 and stopped by SIGTERM, then SIGKILL — every wait bounded. The embedded
server and the fault proxy are both started this way, by tests, benchmarks and the demo."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

__all__ = ["ChildProcess", "ChildStartError", "free_port", "HOST"]

HOST = "127.0.0.1"


class ChildStartError(RuntimeError):
    """The child exited or did not become healthy in time; the message quotes its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class ChildProcess:
    """``python -m surgelab <args>``; subclasses say which arguments and which health path."""

    label = "surgelab"
    health_path = "/health"

    def __init__(self, *, startup_timeout: float = 20.0, stop_timeout: float = 5.0, port: int = 0) -> None:
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.requested_port = port  # 0: a free port at every start; else this one (a restart keeps it)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__

    def command(self) -> Sequence[str]:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ready_url(self) -> str:
        """What ``start`` returns once the child is healthy."""
        return self.root_url

    def start(self) -> str:
        """Start the child and wait until it is healthy; return ``ready_url``."""
        self.port = self.requested_port or free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "surgelab", *self.command()],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ChildStartError(f"{self.label} exited with {self.process.returncode}: {self.log_tail()}")
            if self.get(self.health_path) is not None:
                return self.ready_url
            time.sleep(0.05)
        self.stop()
        raise ChildStartError(f"{self.label} not healthy after {self.startup_timeout}s: {self.log_tail()}")

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

    def get(self, path: str) -> bytes | None:
        """The body of ``GET path`` when it answers 200, else None."""
        try:
            with urllib.request.urlopen(self.root_url + path, timeout=1.0) as response:
                return response.read() if response.status == 200 else None
        except (urllib.error.URLError, OSError):
            return None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
        self._log.close()
