"""Servers for the kind tests, real subprocesses: the embedded server (tiny profile) and a KServe v2 server."""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from surgelab.server.process import serve_process


@pytest.fixture(scope="package")
def embedded() -> Iterator[str]:
    with serve_process(profile="tiny") as url:
        yield url


@pytest.fixture(scope="package")
def kserve() -> Iterator[str]:
    cmd = [sys.executable, "-m", "surgelab.testing.kserve_server", "--port", "0", "--model", "llama", "--delay", "0.02"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline, url = time.monotonic() + 15, None
    while url is None and time.monotonic() < deadline and selector.select(timeout=max(deadline - time.monotonic(), 0)):
        line = proc.stdout.readline()
        if not line:
            break
        if m := re.search(r"listening on (http://127\.0\.0\.1:\d+)", line):
            url = m[1]
    selector.close()
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # a full pipe would block the server
    try:
        assert url, "the KServe server did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        proc.stdout.close()
