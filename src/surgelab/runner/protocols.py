"""The interfaces the runner owns: what it needs from a client, and from whoever watches a run.

The runner calls these; the code below it implements them structurally, without importing
this module: ``client.openai.OpenAIClient`` is a ``Client`` (and the class itself a
``ClientFactory``), the exporter, the dashboard and the compare mode's response recorder are
``Observer`` s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.record import Outcome
from surgelab.metrics.store import RecordMeta
from surgelab.scenario.model import Target
from surgelab.tokenizer import Tokenizer
from surgelab.workload.request import RequestSpec

__all__ = ["Client", "ClientFactory", "Observer", "RecordSink"]


class Client(Protocol):
    """Sends one request at its intended time and fills its outcome; opened and closed around a run."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> Any: ...

    async def send(self, spec: RequestSpec, out: Outcome, at_ns: int | None = None) -> None:
        """Never raises for what the target does: every result, failures included, goes into ``out``."""
        ...


class ClientFactory(Protocol):
    """Builds the client of one target: its clock, the run's tokenizer, its key, its share of connections."""

    def __call__(
        self,
        target: Target,
        clock: Callable[[], int],
        tokenizer: Tokenizer,
        api_key: str | None = None,
        pool_size: int = 0,
    ) -> Client: ...


class Observer(Protocol):
    """Sees every recorded request and every live snapshot (exporters, dashboards)."""

    def observe(self, meta: RecordMeta, out: Outcome) -> None: ...

    def update(self, snapshot: LiveSnapshot) -> None: ...


class RecordSink(Protocol):
    """Where a shard's flushed records go: ``metrics.store.RecordStore`` (the run directory's parts)
    or ``metrics.store.HeldTables`` (kept for a Ray driver to take while the run goes on)."""

    def write(self, table: pa.Table) -> None: ...
