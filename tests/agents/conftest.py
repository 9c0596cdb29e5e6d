"""The embedded server (tiny profile) as a real subprocess, for the tool-call and agent tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from surgelab.server.process import serve_process


@pytest.fixture(scope="package")
def embedded() -> Iterator[str]:
    with serve_process(profile="tiny") as url:
        yield url
