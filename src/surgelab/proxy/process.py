"""Start ``surgelab proxy`` as a real subprocess on a free loopback port, for tests and benchmarks.

Like ``surgelab.server.process``: the child is ``sys.executable -m surgelab proxy``;
readiness is ``GET /_proxy/health`` answering 200; shutdown is SIGTERM, then SIGKILL.
Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from surgelab.server.process import HOST, ServerStartError, free_port

__all__ = ["ProxyProcess", "proxy_process"]


class ProxyProcess:
    """One ``surgelab proxy`` child in front of ``upstream``; a (sync) context manager."""

    def __init__(self, upstream: str, args: Sequence[str] = (), *, startup_timeout: float = 20.0, stop_timeout: float = 5.0) -> None:
        self.upstream = upstream
        self.args = [*args]
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def url_for(self, upstream_url: str) -> str:
        """``upstream_url`` (which starts with the upstream) as seen through the proxy."""
        origin = self.upstream.rstrip("/")
        return self.root_url + upstream_url[len(origin) :] if upstream_url.startswith(origin) else self.root_url

    def start(self) -> str:
        self.port = free_port()
        command = [sys.executable, "-m", "surgelab", "proxy", "--listen", f"{HOST}:{self.port}", "--upstream", self.upstream, *self.args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(f"surgelab proxy exited with {self.process.returncode}: {self.log_tail()}")
            if self._get("/_proxy/health") is not None:
                return self.root_url
            time.sleep(0.05)
        self.stop()
        raise ServerStartError(f"surgelab proxy not ready after {self.startup_timeout}s: {self.log_tail()}")

    def stats(self) -> dict[str, Any]:
        """What the proxy injected so far (``/_proxy/stats``)."""
        raw = self._get("/_proxy/stats")
        return json.loads(raw) if raw else {}

    def stop(self) -> int | None:
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

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(self.root_url + path, timeout=1.0) as response:
                return response.read() if response.status == 200 else None
        except (urllib.error.URLError, OSError):
            return None

    def __enter__(self) -> ProxyProcess:
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
def proxy_process(upstream: str, args: Sequence[str] = (), **kwargs: Any) -> Iterator[ProxyProcess]:
    """``with proxy_process(server.root_url, ["--drop", "1%"]) as proxy: ... proxy.root_url + "/v1"``"""
    with ProxyProcess(upstream, args, **kwargs) as proxy:
        yield proxy
