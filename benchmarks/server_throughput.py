"""How many streaming requests and tokens per second ``surgelab serve --profile tiny`` sustains.

Starts the server as a real subprocess, drives it with a closed loop of aiohttp streaming
clients (every request forces exactly ``--output-tokens`` tokens with ``ignore_eos``) and
prints the sustained rates. The tiny profile's step time is near zero, so the figure is the
server's own overhead: HTTP, SSE framing, the engine's bookkeeping. Client and server share
the machine, so on a small box the client's CPU use lowers the figure.

    python benchmarks/server_throughput.py --concurrency 64 --output-tokens 16 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp

from surgelab.server.process import ServerProcess


async def drive(
    base_url: str, concurrency: int, output_tokens: int, duration: float, warmup: float
) -> tuple[int, int, int, float]:
    body = {
        "model": "surgelab-tiny",
        "messages": [{"role": "user", "content": "Count to sixteen."}],
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    done = tokens = errors = 0
    start = time.perf_counter() + warmup
    stop = start + duration

    async def user(session: aiohttp.ClientSession) -> None:
        nonlocal done, tokens, errors
        while time.perf_counter() < stop:
            counted = 0
            async with session.post(base_url + "/chat/completions", json=body) as reply:
                if reply.status != 200:
                    errors += 1
                    await reply.read()
                    continue
                async for line in reply.content:
                    if line.startswith(b"data: {"):
                        counted += 1
            if time.perf_counter() >= start:
                done += 1
                tokens += counted
                errors += counted != output_tokens

    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(user(session) for _ in range(concurrency)))
    return done, tokens, errors, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first")
    args = parser.parse_args()
    with ServerProcess(profile="tiny") as server:
        try:
            import uvloop

            run = uvloop.run
        except ImportError:  # pragma: no cover
            run = asyncio.run
        done, tokens, errors, elapsed = run(
            drive(server.base_url, args.concurrency, args.output_tokens, args.duration, args.warmup)
        )
    print(
        f"surgelab serve --profile tiny: concurrency {args.concurrency}, "
        f"{args.output_tokens} output tokens per request, {elapsed:.1f} s measured"
    )
    print(f"  {done / elapsed:8.0f} streaming requests/s")
    print(f"  {tokens / elapsed:8.0f} tokens/s (one SSE event each)")
    print(f"  {errors} errors or short streams")


if __name__ == "__main__":
    main()
