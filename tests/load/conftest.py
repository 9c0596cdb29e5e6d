"""The embedded server (``surgelab serve --profile tiny``) as a real subprocess, once per session.

It counts prompt tokens exactly as the workload's tokenizer does, chat history included, so
runs against it can compare the server's ``usage`` with what the client predicted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from surgelab.server.process import ServerProcess


@pytest.fixture(scope="session")
def embedded() -> Iterator[ServerProcess]:
    with ServerProcess(["--seed", "3", "--model", "ok"], profile="tiny") as server:  # the model scenario_for asks for
        yield server
