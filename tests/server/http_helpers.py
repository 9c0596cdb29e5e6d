"""Small HTTP helpers for server tests: a blocking client and a concurrent burst."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    def json(self) -> Any:
        return orjson.loads(self.body)

    def events(self) -> list[Any]:
        """Decoded SSE ``data:`` payloads, checking the framing and the final [DONE]."""
        assert self.headers["Content-Type"].startswith("text/event-stream")
        raw = self.body.decode()
        assert raw.endswith("\n\n")
        events = raw[:-2].split("\n\n")
        assert all(e.startswith("data: ") for e in events), events[:3]
        assert events[-1] == "data: [DONE]"
        return [orjson.loads(e[len("data: ") :]) for e in events[:-1]]


class Http:
    def __init__(self, root: str) -> None:
        self.root = root

    def get(self, path: str, timeout: float = 10.0) -> Reply:
        return self._send(urllib.request.Request(self.root + path), timeout)

    def post(self, path: str, body: Any, timeout: float = 10.0) -> Reply:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        request = urllib.request.Request(
            self.root + path, data=data, method="POST", headers={"Content-Type": "application/json"}
        )
        return self._send(request, timeout)

    def _send(self, request: urllib.request.Request, timeout: float) -> Reply:
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Reply(response.status, dict(response.headers), response.read(), time.perf_counter() - start)
        except urllib.error.HTTPError as error:
            return Reply(error.code, dict(error.headers), error.read(), time.perf_counter() - start)


def burst(root: str, path: str, bodies: list[Any], timeout: float = 15.0) -> list[Reply]:
    """Send every body at once and collect the replies, in order."""

    async def one(session: aiohttp.ClientSession, body: Any) -> Reply:
        start = time.perf_counter()
        async with session.post(
            root + path, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
        ) as response:
            data = await response.read()
            return Reply(response.status, dict(response.headers), data, time.perf_counter() - start)

    async def main() -> list[Reply]:
        limits = aiohttp.TCPConnector(limit=0)
        client_timeout = aiohttp.ClientTimeout(total=timeout)
        async with aiohttp.ClientSession(connector=limits, timeout=client_timeout) as session:
            return list(await asyncio.gather(*(one(session, b) for b in bodies)))

    return asyncio.run(main())
