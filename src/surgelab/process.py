"""A surgelab command as a real child process on a free loopback port, ready when its health
URL answers 200 and stopped by SIGTERM, then SIGKILL — every wait bounded. The embedded
server and the fault proxy are both started this way, by tests, benchmarks and the demo.

``ListeningChild`` is the same for any command that binds a port of its own choosing
(``--port 0``) and prints ``listening on URL`` once it accepts connections, as the test
servers do: it is ready when that line is in its log.

A child's output (stdout and stderr) goes to a temporary file, never to a pipe: a pipe that
nobody reads fills up and blocks the child in mid-run, a file does not."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence

__all__ = ["ChildProcess", "ChildStartError", "ListeningChild", "free_port", "HOST"]

HOST = "127.0.0.1"
_LISTENING = re.compile(rb"listening on (https?://\S+)")


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
    not_ready = "not healthy"  # what the startup timeout says

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

    def argv(self) -> Sequence[str]:
        """The whole command line: ``python -m surgelab`` and ``command()``."""
        return [sys.executable, "-m", "surgelab", *self.command()]

    def is_ready(self) -> bool:
        """Whether the running child serves yet: its health path answers 200."""
        return self.get(self.health_path) is not None

    def start(self) -> str:
        """Start the child on a free port (or the one asked for) and wait until it is healthy; return ``ready_url``."""
        self.port = self.requested_port or free_port()
        return self._spawn_until_ready()

    def _spawn_until_ready(self) -> str:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            self.argv(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ChildStartError(f"{self.label} exited with {self.process.returncode}: {self.log_tail()}")
            if self.is_ready():
                return self.ready_url
            time.sleep(0.05)
        self.stop()
        raise ChildStartError(f"{self.label} {self.not_ready} after {self.startup_timeout}s: {self.log_tail()}")

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

    def log(self) -> bytes:
        """All the child has printed so far (read without moving the offset the child writes at)."""
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0)

    def log_tail(self, limit: int = 2000) -> str:
        return self.log().decode(errors="replace")[-limit:].strip()

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


class ListeningChild(ChildProcess):
    """Any command (``argv``, run as given) that prints ``listening on URL`` once it accepts
    connections; ``start`` returns that URL, ``root_url`` from then on. The command picks its
    own port, typically with ``--port 0``, so no port is reserved for it beforehand."""

    not_ready = "printed no 'listening on URL'"

    def __init__(
        self, argv: Sequence[str], *, label: str, startup_timeout: float = 20.0, stop_timeout: float = 5.0
    ) -> None:
        super().__init__(startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self.label = label
        self._argv = [*argv]
        self._url = ""
        self._log_start = 0  # where this start's output begins in the log (a restart appends to it)

    def argv(self) -> Sequence[str]:
        return self._argv

    def is_ready(self) -> bool:
        if match := _LISTENING.search(self.log(), self._log_start):
            self._url = match[1].decode()
            self.port = urllib.parse.urlsplit(self._url).port or 0
        return bool(self._url)

    @property
    def root_url(self) -> str:
        return self._url

    def start(self) -> str:
        """Start the command and wait for its ``listening on URL`` line; return the URL."""
        self._url, self._log_start = "", len(self.log())
        return self._spawn_until_ready()
