"""Incremental Server-Sent Events parsing for streamed completions.

Fed raw network chunks as they arrive; returns the ``data`` payload of every event completed
so far. Handles LF and CRLF line ends, comments, multi-line data and events split anywhere
across chunks, per the WHATWG event-stream rules that OpenAI-style servers follow.
"""

from __future__ import annotations

__all__ = ["SSEParser", "SSEError"]


class SSEError(ValueError):
    """The stream is not valid SSE (for example an unbounded line)."""


class SSEParser:
    def __init__(self, max_line: int = 8 * 1024 * 1024) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume ``chunk``; return the data of every event it completed, in order."""
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[bytes] = []
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = buffer[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:  # blank line: dispatch the event
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
            # comments (":...") and other fields (event, id, retry) carry no tokens
        self._buffer = buffer[start:]
        if len(self._buffer) > self._max_line:
            raise SSEError(f"SSE line longer than {self._max_line} bytes")
        return events

    def close(self) -> list[bytes]:
        """End of stream: a final event without its blank line still counts."""
        return self.feed(b"\n\n") if (self._buffer or self._data) else []
