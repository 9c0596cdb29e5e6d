"""Servers for the kind tests, real subprocesses: the embedded server (tiny profile) and a KServe v2 server."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from surgelab.process import ListeningChild
from surgelab.server.process import serve_process


@pytest.fixture(scope="package")
def embedded() -> Iterator[str]:
    with serve_process(profile="tiny") as url:
        yield url


@pytest.fixture(scope="package")
def kserve() -> Iterator[str]:
    cmd = [sys.executable, "-m", "surgelab.testing.kserve_server", "--port", "0", "--model", "llama", "--delay", "0.02"]
    with ListeningChild(cmd, label="the KServe server", startup_timeout=15) as server:
        yield server.root_url
