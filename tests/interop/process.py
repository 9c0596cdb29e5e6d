"""A stack's server as a child process: started in its own process group, ready when
``GET /health`` answers 200, stopped with its whole group.

The group matters: nginx's master forks a worker and granian's main process spawns one, and a
test that fails (or a master that dies) must not leave either behind. Every wait is bounded.
The child's output goes to a file (a pipe nobody reads would block it) and is quoted when it
does not start. Requests to the server go through ``http.client``, which ignores proxy settings.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ServerProcess", "free_port", "get", "post"]

HOST = "127.0.0.1"


def free_port() -> int:
    """A port nobody listens on now (the server binds it a moment later; a clash is retried by the caller)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """(status, body) of ``GET path``."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def post(port: int, path: str, body: object, headers: Mapping[str, str] | None = None) -> http.client.HTTPResponse:
    """The response to one JSON ``POST``, read to its end (``.version``, ``.headers``, ``.data``)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        response.data = response.read()  # type: ignore[attr-defined]
        return response
    finally:
        conn.close()


class ServerProcess:
    """One command serving on ``port``; use ``start`` and ``stop`` (or a ``with`` block)."""

    def __init__(self, argv: Sequence[str], port: int, label: str, cwd: Path) -> None:
        self.argv, self.port, self.label, self.cwd = [*argv], port, label, cwd
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()

    def start(self, timeout: float = 20.0) -> None:
        self.process = subprocess.Popen(
            self.argv, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.process.returncode}: {self.log_tail()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                if get(self.port, "/health", timeout=1.0)[0] == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{self.label} not healthy after {timeout:g}s: {self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM to the whole group, SIGKILL to what is left after 5 s."""
        proc, self.process = self.process, None
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)  # the group start_new_session made: this child's id
                try:
                    proc.wait(5)
                    with contextlib.suppress(ProcessLookupError):  # a worker outliving its parent
                        os.killpg(proc.pid, signal.SIGKILL)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._log.close()

    def log_tail(self, limit: int = 1500) -> str:
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")[-limit:].strip()

    def __enter__(self) -> ServerProcess:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
