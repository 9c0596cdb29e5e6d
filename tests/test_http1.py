"""The lean HTTP/1.1 client (client/http1.py) against raw loopback servers that answer byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import time
from types import SimpleNamespace

import pytest

from surgelab.aio import run_async
from surgelab.client import http1
from surgelab.client.http1 import ConnectTimeout, HttpPool, InvalidResponse, ServerDisconnected
from surgelab.client.timer import SendTimer
from surgelab.client.transport import multipart


async def _serve(answer, requests: list[bytes]):
    """A raw server: collects each request's bytes, then lets ``answer(writer, n)`` reply."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            body = await reader.readexactly(length)
            requests.append(head + body)
            if not await answer(writer, len(requests)):
                writer.close()
                return

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _run(answer, client):
    requests: list[bytes] = []

    async def main():
        server, url = await _serve(answer, requests)
        async with server:
            return await client(url)

    return run_async(main()), requests


async def _get(pool: HttpPool, url: str, body: bytes = b"{}") -> tuple[int, bytes]:
    async with pool.request("POST", url, body) as resp:
        return resp.status, await resp.read()


def test_content_length_chunked_and_close_delimited_bodies_on_one_pool():
    async def answer(writer, n):
        if n == 1:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        elif n == 2:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        await writer.drain()
        return n < 3

    async def client(url):
        pool = HttpPool({"Authorization": "Bearer k"})
        got = [await _get(pool, url + "/v1/x") for _ in range(3)]
        opened = pool.open_connections
        await pool.close()
        return got, opened

    (got, opened), requests = _run(answer, client)
    assert got == [(200, b"hello"), (200, b"abcde"), (200, b"until the end")]
    assert opened == 0  # the close-delimited answer's connection is not kept
    assert requests[0].startswith(b"POST /v1/x HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Authorization: Bearer k\r\n" in requests[0] and requests[0].endswith(b"Content-Length: 2\r\n\r\n{}")
    assert len(requests) == 3


def test_keep_alive_reuses_one_connection_and_the_limit_queues_requests():
    connections = []

    async def answer(writer, n):
        connections.append(id(writer.transport))
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return True

    async def client(url):
        pool = HttpPool({}, limit=2)
        started = time.perf_counter()
        got = await asyncio.gather(*(_get(pool, url) for _ in range(6)))
        took = time.perf_counter() - started
        await pool.close()
        return got, took

    (got, took), _ = _run(answer, client)
    assert got == [(200, b"ok")] * 6
    assert len(set(connections)) == 2  # never more than the limit, each reused
    assert took >= 0.15  # 6 requests of 50 ms, two at a time


def test_gzip_body_is_decoded_and_read_n_keeps_the_rest():
    payload = gzip.compress(b"0123456789" * 100)

    async def answer(writer, n):
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload
        )
        await writer.drain()
        return True

    async def client(url):
        pool = HttpPool({})
        async with pool.request("GET", url) as resp:
            head, rest = await resp.read(15), await resp.read()
        await pool.close()
        return head, rest

    (head, rest), requests = _run(answer, client)
    assert head == b"012345678901234" and head + rest == b"0123456789" * 100
    assert b"Content-Length" not in requests[0]  # a GET without a body says nothing about one

def test_a_gzip_stream_whose_first_piece_is_the_header_alone_is_read_to_its_end():
    """nginx gzipping an event stream sends the 10-byte gzip header first: it decodes to nothing, not to the end."""
    payload = gzip.compress(b"data: 1\n\n" * 3)
    pieces = [payload[:10], payload[10:20], payload[20:]]

    async def answer(writer, n):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.02)  # each piece its own read
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def client(url):
        pool = HttpPool({})
        async with pool.request("GET", url) as resp:
            reads = [data async for data in resp.iter_any()]
        await pool.close()
        return reads

    reads, _ = _run(answer, client)
    assert b"".join(reads) == b"data: 1\n\n" * 3 and all(reads)



@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", ServerDisconnected),
        (b"NOT HTTP AT ALL\r\n\r\n", InvalidResponse),
        (b"", ServerDisconnected),
    ],
)
def test_broken_answers_raise_the_error_that_names_them(reply, error):
    async def answer(writer, n):
        writer.write(reply)
        await writer.drain()
        return False  # and close

    async def client(url):
        pool = HttpPool({})
        try:
            await _get(pool, url)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            return exc
        finally:
            await pool.close()

    exc, _ = _run(answer, client)
    assert isinstance(exc, error), exc


def test_connect_timeout_is_its_own_error():
    async def client():
        pool = HttpPool({}, connect_timeout=0.000001)
        try:
            async with pool.request("GET", "http://127.0.0.1:9/"):
                pass
        except (ConnectTimeout, OSError) as exc:
            return exc
        finally:
            await pool.close()

    assert isinstance(run_async(client()), (ConnectTimeout, ConnectionRefusedError))


def test_multipart_body_has_every_field():
    body, content_type = multipart({"file": (b"RIFFdata", "a.wav", "audio/wav"), "model": "whisper"})
    boundary = content_type.split("boundary=")[1]
    assert content_type.startswith("multipart/form-data; boundary=")
    assert body.startswith(f"--{boundary}\r\n".encode()) and body.endswith(f"--{boundary}--\r\n".encode())
    assert b'name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFFdata\r\n' in body
    assert b'name="model"\r\n\r\nwhisper\r\n' in body


@pytest.mark.parametrize("timerfd", [True, False])
def test_send_timer_is_never_early_and_rarely_late(timerfd):
    async def main():
        timer = SendTimer()
        if timerfd:
            timer.open()
        lateness = []
        try:
            waits = []
            base = time.perf_counter_ns() + 2_000_000
            for k in range(40):  # overlapping waits, armed out of order
                due = base + ((k * 7919) % 40) * 53_000

                async def one(due=due):
                    await timer.wait_until(time.perf_counter_ns, due)
                    lateness.append(time.perf_counter_ns() - due)

                waits.append(asyncio.ensure_future(one()))
            await asyncio.gather(*waits)
        finally:
            timer.close()
        return sorted(lateness)

    medians = []
    for _ in range(3):  # a busy second core can hold a whole round late (CI once: median 1.7 ms); a slow timer is late every time
        lateness = run_async(main())
        assert len(lateness) == 40 and lateness[0] >= 0  # never early, on any round
        medians.append(lateness[len(lateness) // 2])
        if medians[-1] < 500_000:  # the median wake-up is well inside the timer's millisecond
            break
    assert min(medians) < 500_000, medians


# -- pooled connections the server has closed (issue: llama.cpp's server broke a default run) ------


def _stale_server(answer_at):
    """A server that counts connections and answers request ``k`` of a connection (1-based) when
    ``answer_at(k, idle_s)`` returns the head's extra headers; None means: read it and close silently,
    as a server does whose keep-alive timer or request limit fired while the request was on its way."""
    seen: list[tuple[int, int]] = []  # (connection number, request number on it)

    async def handle(reader, writer):
        k, last = 0, time.perf_counter()
        conn = max([c for c, _ in seen], default=0) + 1
        seen.append((conn, 0))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                k += 1
                idle, last = time.perf_counter() - last, time.perf_counter()
                seen.append((conn, k))
                extra = answer_at(k, idle)
                if extra is None:
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n%s\r\nok" % extra)
                await writer.drain()
                last = time.perf_counter()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    return handle, seen


def _sequential(handle, n: int, pause_s: float = 0.0):
    """``n`` requests one after another on one pool; each one's (status, body, resent)."""

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        async with server:
            pool = HttpPool({})
            got = []
            for i in range(n):
                if i and pause_s:
                    await asyncio.sleep(pause_s)
                async with pool.request("POST", url, b"{}") as resp:
                    got.append((resp.status, await resp.read(), resp.resent))
            await pool.close()
            return got

    return run_async(main())


def _requests_by_connection(seen) -> dict[int, int]:
    out: dict[int, int] = {}
    for conn, k in seen:
        out[conn] = max(out.get(conn, 0), k)
    return out


def test_a_request_cut_on_a_reused_connection_is_its_own_error_and_never_sent_twice():
    """The server reads the 2nd request of a connection and closes without a word (a drop, or its
    keep-alive timer firing as the request arrived): that request fails, naming the reuse; it used
    to be sent again on a new connection, so a proxy's 5 % drops showed as 0.3 % errors."""
    handle, seen = _stale_server(lambda k, idle: b"" if k == 1 else None)  # one answer per connection

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        got = []
        async with server:
            pool = HttpPool({})
            for _ in range(3):
                try:
                    async with pool.request("POST", url, b"{}") as resp:
                        got.append((resp.status, await resp.read(), resp.resent))
                except ServerDisconnected as exc:
                    got.append(str(exc))
            await pool.close()
        return got

    got = run_async(main())
    assert got[0] == (200, b"ok", False) and got[2] == (200, b"ok", False)
    assert "before the response ended (reused connection: a drop, or its idle close crossed the request)" in got[1]
    assert _requests_by_connection(seen) == {1: 2, 2: 1}  # the cut request reached the server once, and only once


@pytest.mark.parametrize("linger", [0.0, 0.1], ids=["closed-at-once", "fin-then-close"])
def test_a_request_crossing_the_servers_close_after_its_answer_is_sent_once_more(monkeypatch, linger):
    """llama.cpp's llama-server announces keep-alive and closes after every streamed answer; the
    next request can leave before its FIN arrives. The kernel proves the server never read that
    request (its FIN came first, then a reset for the request's bytes: EPIPE), so it goes out once
    more on a new connection, visibly. Here the FIN is held back from the client's loop to make
    the race certain; the server's own count shows each request read once. ``fin-then-close``:
    the server's socket closes on the unread request a moment after its FIN (cpp-httplib shuts
    down, then closes), so the reset comes after the client saw the close: it is waited for."""
    read: list[int] = []  # the connection each request was read on
    closing = asyncio.Event()

    async def handle(reader, writer):
        conn = len({*read}) + 1
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0]))
        read.append(conn)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
        await writer.drain()
        await closing.wait()  # the client has pooled the connection and stopped reading it
        writer.transport.pause_reading()  # a thread that no longer reads this socket, as cpp-httplib's
        writer.write_eof()  # the FIN, after the answer, nothing unread yet
        await asyncio.sleep(linger)
        writer.close()  # the request that came meanwhile is unread: the kernel resets it

    monkeypatch.setattr(http1, "select", SimpleNamespace(select=lambda *a: ([], [], [])))  # the FIN not yet seen
    monkeypatch.setattr(http1, "_RESET_WAIT_S", 1.0)  # a slow machine's moment, well past the server's linger

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        got = []
        async with server:
            pool = HttpPool({})
            async with pool.request("POST", url, b"{}") as resp:
                got.append((resp.status, await resp.read(), resp.resent))
            (conn,) = next(iter(pool._idle.values()))
            conn.transport.pause_reading()
            closing.set()
            await asyncio.sleep(0.02)  # the FIN is in the client's socket, unread
            asyncio.get_running_loop().call_later(0.01, conn.transport.resume_reading)
            async with pool.request("POST", url, b"{}") as resp:
                got.append((resp.status, await resp.read(), resp.resent))
            await pool.close()
        return got

    assert run_async(main()) == [(200, b"ok", False), (200, b"ok", True)]
    assert read == [1, 2]  # the crossing request was read once, on the new connection


def test_keep_alive_max_is_honoured():
    handle, seen = _stale_server(lambda k, idle: b"Keep-Alive: timeout=60, max=%d\r\n" % (3 - k) if k < 3 else None)
    got = _sequential(handle, 4)
    assert got == [(200, b"ok", False)] * 4  # never sent a 3rd request where max=1 said the 2nd was the last
    assert _requests_by_connection(seen) == {1: 2, 2: 2}


def test_keep_alive_timeout_is_honoured():
    handle, seen = _stale_server(lambda k, idle: b"Keep-Alive: timeout=1\r\n" if idle < 0.6 or k == 1 else None)
    got = _sequential(handle, 3, pause_s=0.7)  # idle longer than the timeout less its margin
    assert got == [(200, b"ok", False)] * 3
    assert _requests_by_connection(seen) == {1: 1, 2: 1, 3: 1}


def test_a_failure_on_a_new_connection_is_not_sent_again():
    handle, seen = _stale_server(lambda k, idle: None)

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        async with server:
            pool = HttpPool({})
            with pytest.raises(ServerDisconnected):
                async with pool.request("POST", url, b"{}"):
                    pass
            await pool.close()

    run_async(main())
    assert _requests_by_connection(seen) == {1: 1}


def test_a_half_closed_idle_connection_is_not_handed_out():
    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.transport.write_eof()  # FIN, but the socket still reads: whatever comes is never answered
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.read(), 5)
        writer.close()

    got = _sequential(handle, 2, pause_s=0.1)
    assert got == [(200, b"ok", False)] * 2


def test_a_request_that_failed_before_its_answer_gives_its_pool_slot_back():
    """A pool of one: a request cut before its head (or timed out waiting for it) must not keep the
    slot, or every later request waits for a connection that is never released."""
    handle, seen = _stale_server(lambda k, idle: None)  # reads each request, answers none

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
        async with server:
            pool = HttpPool({}, limit=1)

            async def one() -> None:
                async with pool.request("POST", url, b"{}"):
                    pass

            for _ in range(3):
                with pytest.raises(ServerDisconnected):
                    await asyncio.wait_for(one(), 2)
            await pool.close()

    run_async(main())
    assert _requests_by_connection(seen) == {1: 1, 2: 1, 3: 1}
