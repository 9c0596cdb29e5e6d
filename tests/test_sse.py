"""Incremental SSE parsing: events split anywhere across network chunks."""

from __future__ import annotations

import pytest

from surgelab.client.sse import SSEError, SSEParser

STREAM = (
    b": keep-alive comment\n"
    b'data: {"a": 1}\n\n'
    b"event: message\nid: 7\nretry: 100\n"
    b'data: {"b": 2}\n\n'
    b"data: line one\ndata: line two\n\n"
    b"data:no-space\n\n"
    b"data:  two spaces\n\n"
    b"\n\n"  # blank lines without data dispatch nothing
    b"data: [DONE]\n\n"
)
EVENTS = [b'{"a": 1}', b'{"b": 2}', b"line one\nline two", b"no-space", b" two spaces", b"[DONE]"]


def _parse(chunks: list[bytes]) -> list[bytes]:
    parser = SSEParser()
    events = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events + parser.close()


def test_whole_stream():
    assert _parse([STREAM]) == EVENTS


@pytest.mark.parametrize("stream", [STREAM, STREAM.replace(b"\n", b"\r\n")], ids=["lf", "crlf"])
def test_split_at_every_byte_boundary(stream):
    for cut in range(len(stream) + 1):
        assert _parse([stream[:cut], stream[cut:]]) == EVENTS, cut


@pytest.mark.parametrize("stream", [STREAM, STREAM.replace(b"\n", b"\r\n")], ids=["lf", "crlf"])
def test_one_byte_at_a_time(stream):
    assert _parse([stream[i : i + 1] for i in range(len(stream))]) == EVENTS


def test_crlf_split_between_cr_and_lf():
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r") == []
    assert parser.feed(b"\n") == [b"x"]


def test_events_are_returned_as_soon_as_complete():
    parser = SSEParser()
    assert parser.feed(b"data: 1\n\ndata: 2\n") == [b"1"]
    assert parser.feed(b"\n") == [b"2"]


def test_comments_only_yield_nothing():
    assert _parse([b": ping\n\n: ping\n\n"]) == []


def test_close_flushes_a_final_event_without_its_blank_line():
    parser = SSEParser()
    assert parser.feed(b"data: first\n\ndata: last") == [b"first"]
    assert parser.close() == [b"last"]
    parser = SSEParser()
    assert parser.feed(b"data: last\n") == []
    assert parser.close() == [b"last"]


def test_close_on_an_empty_or_finished_stream():
    parser = SSEParser()
    assert parser.close() == []
    parser.feed(b"data: x\n\n")
    assert parser.close() == []


def test_unbounded_line_is_an_error():
    parser = SSEParser(max_line=64)
    with pytest.raises(SSEError):
        parser.feed(b"data: " + b"x" * 100)
