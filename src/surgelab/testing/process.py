"""The scripted server as a real subprocess, for calibration, benchmarks and tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

__all__ = ["scripted_server"]


@contextlib.contextmanager
def scripted_server(ttft: float = 0.0, itl: float = 0.0, timeout: float = 20.0) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of a scripted server subprocess."""
    cmd = [sys.executable, "-m", "surgelab.testing.scripted_server", "--port", "0", "--ttft", str(ttft), "--itl", str(itl)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline and "listening on" not in line:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line and proc.poll() is not None:
                raise RuntimeError("the scripted server exited before listening")
        if "listening on" not in line:
            raise RuntimeError("the scripted server did not start in time")
        yield line.split("listening on ", 1)[1].strip() + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
