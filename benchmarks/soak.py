"""A steady soak: does the client leak memory, file descriptors or connections over a long run?

Starts the embedded server (``surgelab serve --profile tiny``) in its own process and drives
it from this process for ``--minutes`` (30 by default) at a steady open-loop rate, streaming,
keep-alive. Every ``--sample`` seconds it reads this process's resident memory (VmRSS), its
open file descriptors and how many of them are sockets, from /proc (Linux). It reports:

  * client RSS right after the warm-up (the first ``--warmup-minutes``, default 2, or a fifth
    of the run when that is shorter) and at the end, and the growth between them (target < 5 %);
  * open file descriptors and sockets before the run, after the warm-up, at the end of the
    load, and after the run has closed its connections (target: back to the start);
  * the run's own figures (requests, states, P99 latency), so a soak that measured nothing
    cannot pass for one that leaked nothing.

It is a benchmark, not a test: it asserts nothing, it prints a Markdown section for
benchmarks/RESULTS.md (and ``--json PATH`` writes the raw samples).

    python benchmarks/soak.py                 # 30 minutes
    python benchmarks/soak.py --minutes 12 --rate 40
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from surgelab.aio import run_async
from surgelab.runner import run_scenario
from surgelab.scenario import load_scenario
from surgelab.server.process import ServerProcess


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descriptors() -> tuple[int, int]:
    """(open file descriptors, of which sockets) of this process."""
    fds = sockets = 0
    for entry in os.scandir("/proc/self/fd"):
        fds += 1
        with contextlib.suppress(OSError):  # closed while we looked
            sockets += os.readlink(entry.path).startswith("socket:")
    return fds, sockets


def sample(t0: float, server_pid: int) -> dict:
    fds, sockets = descriptors()
    return {"t_s": round(time.monotonic() - t0, 1), "rss_kib": rss_kib(), "fds": fds, "sockets": sockets,
            "server_rss_kib": rss_kib(server_pid)}  # fmt: skip


async def soak(url: str, server_pid: int, args: argparse.Namespace, workdir: Path) -> tuple[dict, list[dict], dict]:
    seconds = args.minutes * 60
    overrides = {
        "name": ("", "soak"), "target.url": ("", url), "target.model": ("", "surgelab-tiny"), "load.rate": ("", args.rate),
        "load.arrival": ("", "poisson"), "load.duration": ("", seconds), "workload.prompt_tokens": ("", 64),
        "workload.output_tokens": ("", 32), "seed": ("", 1),
    }  # fmt: skip
    scenario = load_scenario(None, overrides)
    t0 = time.monotonic()
    before = sample(t0, server_pid)
    samples: list[dict] = []
    done = asyncio.Event()

    async def sampler() -> None:
        while not done.is_set():
            samples.append(sample(t0, server_pid))
            with contextlib.suppress(asyncio.TimeoutError):  # noqa: UP041
                await asyncio.wait_for(done.wait(), args.sample)

    task = asyncio.create_task(sampler())
    result = await run_scenario(scenario, workdir / "soak")
    samples.append(sample(t0, server_pid))  # the load has ended, the client's pool is closed
    done.set()
    await task
    return before, samples, result.summary


def report(before: dict, samples: list[dict], summary: dict, args: argparse.Namespace) -> tuple[str, dict]:
    warmup_s = min(args.warmup_minutes * 60, args.minutes * 60 / 5)
    under_load = samples[:-1]
    warm = next((s for s in under_load if s["t_s"] >= warmup_s), under_load[0])
    end, after = under_load[-1], samples[-1]
    growth = (end["rss_kib"] - warm["rss_kib"]) / warm["rss_kib"]
    peak = max(s["rss_kib"] for s in under_load if s["t_s"] >= warm["t_s"])
    r = summary["requests"]
    figures = {
        "minutes": args.minutes, "rate": args.rate, "warmup_s": warm["t_s"], "rss_warm_mib": warm["rss_kib"] / 1024,
        "rss_end_mib": end["rss_kib"] / 1024, "rss_peak_mib": peak / 1024, "rss_growth": growth,
        "fds": [before["fds"], warm["fds"], end["fds"], after["fds"]],
        "sockets": [before["sockets"], warm["sockets"], end["sockets"], after["sockets"]],
        "server_rss_mib": [warm["server_rss_kib"] / 1024, end["server_rss_kib"] / 1024],
        "requests": r["scheduled"], "by_state": r["by_state"], "e2e_p99_ms": summary["latency_ms"]["e2e"]["p99"],
        "throughput": summary["throughput"]["requests_per_s"], "valid": summary["validity"]["valid"],
    }  # fmt: skip
    states = ", ".join(f"{k} {v:,}" for k, v in r["by_state"].items() if v)
    text = f"""## Soak

`python benchmarks/soak.py --minutes {args.minutes:g} --rate {args.rate:g}` — {platform.machine()}, {os.cpu_count()} cores,
Python {platform.python_version()}; the embedded server (`--profile tiny`) in its own process on loopback; open loop,
Poisson {args.rate:g} req/s, 64 prompt / 32 output tokens, streaming, keep-alive; one sample every {args.sample:g} s.

| figure | value |
|---|---|
| duration, requests | {args.minutes:g} min, {r['scheduled']:,} requests ({states}); {summary['throughput']['requests_per_s']:.1f} req/s; E2E P99 {summary['latency_ms']['e2e']['p99']:.0f} ms; run valid: {summary['validity']['valid']} |
| client RSS after warm-up ({warm['t_s']:.0f} s) | {warm['rss_kib'] / 1024:.1f} MiB |
| client RSS at the end of the load | {end['rss_kib'] / 1024:.1f} MiB (peak after warm-up {peak / 1024:.1f} MiB) |
| **client RSS growth after warm-up** | **{growth:+.2%}** (target < 5 %) |
| open file descriptors: before / after warm-up / end of load / after the run | {before['fds']} / {warm['fds']} / {end['fds']} / {after['fds']} |
| sockets among them | {before['sockets']} / {warm['sockets']} / {end['sockets']} / {after['sockets']} |
| server RSS after warm-up → end | {warm['server_rss_kib'] / 1024:.1f} → {end['server_rss_kib'] / 1024:.1f} MiB |
"""
    return text, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=40.0, help="open-loop requests per second")
    parser.add_argument("--warmup-minutes", type=float, default=2.0)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="write the figures and every sample here")
    args = parser.parse_args()
    with ServerProcess(profile="tiny") as server, tempfile.TemporaryDirectory() as tmp:
        before, samples, summary = run_async(soak(server.base_url, server.process.pid, args, Path(tmp)))  # type: ignore[union-attr]
    text, figures = report(before, samples, summary, args)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"figures": figures, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
