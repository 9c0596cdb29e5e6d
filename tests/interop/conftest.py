"""The matrix's servers: one stack configuration running at a time, started on demand.

Cells of one stack that need the same server settings run one after another and share its
process; asking for another configuration stops the running one first, and the session's
end stops the last, so at most one stack's processes are alive and none outlive the run.
A stack whose tool is missing is skipped on a developer's machine and fails in CI (``CI``
set), where ``.ci/run`` installs every one. The versions met are printed at the end, and with
``-v`` what each cell measured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .process import ServerProcess, free_port, get
from .stacks import SERVERS, Settings, Stack

_VERSIONS = pytest.StashKey[dict[str, str]]()
_OBSERVED = pytest.StashKey[dict[str, str]]()


class Running:
    """A started configuration of a stack: where it listens and what it counted."""

    def __init__(self, port: int, processes: list[ServerProcess]) -> None:
        self.port, self.processes = port, processes

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, int]:
        status, body = get(self.port, "/stats")
        assert status == 200, body
        return json.loads(body)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


class Servers:
    def __init__(self, workdir: Path, versions: dict[str, str]) -> None:
        self.workdir, self.versions = workdir, versions
        self._built: set[str] = set()
        self._key: tuple[str, Settings] | None = None
        self._running: Running | None = None

    def get(self, stack: Stack, settings: Settings) -> Running:
        if self._key == (stack.name, settings) and self._running is not None:
            return self._running
        self.close()
        if why := stack.missing():
            (pytest.fail if os.environ.get("CI") else pytest.skip)(f"{stack.name}: {why}")
        if stack.name not in self._built:
            stack.build(self.workdir)
            self._built.add(stack.name)
            self.versions[stack.name] = stack.version()
        self._running = self._start(stack, settings)
        self._key = (stack.name, settings)
        return self._running

    def _start(self, stack: Stack, settings: Settings) -> Running:
        for attempt in range(3):  # a free port can be taken between the probe and the bind
            port = free_port()
            started: list[ServerProcess] = []
            try:
                for command in stack.commands(port, settings, self.workdir):
                    started.append(ServerProcess(command.argv, command.port, command.label, SERVERS))
                    started[-1].start()
                return Running(port, started)
            except RuntimeError:
                for process in reversed(started):
                    process.stop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        running, self._running, self._key = self._running, None, None
        if running is not None:
            running.stop()


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Servers]:
    cache = Servers(tmp_path_factory.mktemp("interop"), pytestconfig.stash.setdefault(_VERSIONS, {}))
    try:
        yield cache
    finally:
        cache.close()


@pytest.fixture(scope="session")
def observed(pytestconfig: pytest.Config) -> dict[str, str]:
    """Cell id -> what it measured, one line, printed at the end (passing or not)."""
    return pytestconfig.stash.setdefault(_OBSERVED, {})


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    versions = config.stash.get(_VERSIONS, {})
    if versions:
        terminalreporter.section("interoperability matrix: stack versions")
        for name, version in versions.items():
            terminalreporter.write_line(f"{name:<18} {version}")
    cells = config.stash.get(_OBSERVED, {})
    if cells and config.option.verbose > 0:
        terminalreporter.section("interoperability matrix: cells")
        for cell, line in cells.items():
            terminalreporter.write_line(f"{cell:<28} {line}")
