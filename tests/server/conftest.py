"""Shared fixtures: one ``surgelab serve --profile tiny`` subprocess for the plain API tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from http_helpers import Http

from surgelab.server.process import ServerProcess


@pytest.fixture(scope="session")
def tiny_server() -> Iterator[ServerProcess]:
    with ServerProcess(["--seed", "7"], profile="tiny") as server:
        yield server


@pytest.fixture
def http(tiny_server: ServerProcess) -> Http:
    return Http(tiny_server.root_url)
