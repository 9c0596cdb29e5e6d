"""Client ceiling against the peer tools: the highest sustained streaming rate each can drive.

One zero-delay streaming server on loopback, 16 output tokens and a 64-token prompt a
request. By default (``--server nginx``) it is nginx (Debian package, one worker process,
installed with apt-get when missing and run as a child of this script) answering every request
with the same pre-built OpenAI-style stream from memory (``native_server.py``): a native
server costs almost no CPU, so it cannot be what limits a client, nor take the core a second
surgelab worker needs. ``--server scripted`` uses the Python scripted server
(``surgelab.testing.scripted_server``, aiohttp, its own process) instead; on 2 cores it needs
most of one at 2,000–4,000 req/s and caps every tool there. For every tool the same
search: constant rates climbing ×1.5 from ``--start`` until a level is not sustained, then
three bisections; a level that fails is run once more before it counts as failed (other
sessions may share the machine). A level is sustained when the tool reports

  * criterion "lag" (surgelab, GuideLLM, AIPerf: tools that record each request's intended
    and actual send time; Locust, whose users are each held to their own schedule, first
    start + k / per-user rate, from the start times its request events report):
    achieved >= 95 % of offered, no errors, schedule lag P99 < 10 ms;
  * criterion "achieved" (``vllm bench serve``: no per-request send schedule is exported;
    and every lag-capable tool again, as ``TOOL-achieved``): achieved >= 95 % of offered and
    no errors.

surgelab runs as its CLI (``surgelab run``) in a fresh process like every peer. Each peer is
installed from PyPI into its own venv under ``~/.cache/surgelab-bench/venvs`` (reused). ``wrk``
(Debian package, closed loop, 32 connections) gives the physical reference: what the server
and a native client reach together on this machine (far above every tool against nginx; the
scripted server's own limit against it). Client CPU per 1,000 requests is the marginal
user+system CPU of the tool's processes between a short and a long run at ``--cpu-rate``
(start-up cancels out).

    python benchmarks/peers_ceiling.py [--seconds 5] [--server nginx|scripted]
                                      [--tools surgelab1,surgelab2,guidellm,aiperf,locust,vllm]

Prints a table per level and the ratios; writes the raw levels as JSON to
``~/.cache/surgelab-bench/peers_ceiling.json``.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from native_server import SERVERS, describe, reference_server
from peers_common import (
    BENCH,
    HEADER,
    RUNNERS,
    Level,
    cpu_children,
    ensure,
    load_average,
    machine,
    run_surgelab,
    run_wrk,
)  # fmt: skip

from surgelab import __version__

ALL = (
    "surgelab1",
    "surgelab2",
    "surgelab1-achieved",
    "guidellm",
    "aiperf",
    "locust",
    "vllm",
    "guidellm-achieved",
    "aiperf-achieved",
    "locust-achieved",
)


def runner_for(tool: str):
    """``surgelabN`` is surgelab with N workers; a ``-achieved`` suffix judges a tool by the "achieved" criterion."""
    if tool.startswith("surgelab"):
        name, _, mode = tool.partition("-")
        workers = int(name[len("surgelab") :] or 1)

        def run(base: str, rate: float, seconds: float, work: Path) -> Level:
            lv = run_surgelab(base, rate, seconds, work, workers=workers)
            lv.use_lag = mode != "achieved"
            lv.tool += " (achieved)" if mode == "achieved" else ""
            return lv

        return run
    name, _, mode = tool.partition("-")

    def run_peer(base: str, rate: float, seconds: float, work: Path) -> Level:
        lv = RUNNERS[name](base, rate, seconds, work)
        if mode == "achieved":
            lv.use_lag, lv.tool = False, lv.tool + " (achieved)"
        return lv

    return run_peer


def search(
    tool: str, base: str, seconds: float, start: float, work: Path, deadline: float
) -> tuple[float, list[Level]]:
    run = runner_for(tool)
    levels: list[Level] = []

    def level(rate: float) -> Level:
        """One level; a level that fails is run once more (other sessions share this machine)."""
        for attempt in range(2):
            lv = run(base, rate, seconds, work)
            lv.note += f"; load {load_average()[0]:.1f}" + ("; retry" if attempt else "")
            levels.append(lv)
            print(lv.line(), flush=True)
            if lv.sustained:
                break
        return lv

    best, rate = 0.0, start
    while rate <= 20_000 and time.monotonic() < deadline and level(rate).sustained:
        best, rate = rate, rate * 1.5
    lo, hi = best, rate
    for _ in range(3 if best else 0):
        if time.monotonic() >= deadline:
            break
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if level(mid).sustained else (lo, mid)
    return lo, levels


def cpu_per_1000(tool: str, base: str, rate: float, work: Path, short: float, long: float) -> dict:
    """Marginal CPU seconds per 1,000 completed requests between a short and a long run."""
    run = runner_for(tool)
    figures = []
    for seconds in (short, long):
        before = cpu_children()
        lv = run(base, rate, seconds, work)
        figures.append((cpu_children() - before, lv.completed + lv.errors, lv))
    (c1, n1, _), (c2, n2, lv2) = figures
    per = (c2 - c1) / (n2 - n1) * 1000 if n2 > n1 else float("nan")
    return {"tool": tool, "rate": rate, "cpu_s_short": c1, "cpu_s_long": c2, "requests_short": n1,
            "requests_long": n2, "cpu_s_per_1000": per, "sustained_long": lv2.sustained}  # fmt: skip


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))  # clean up the server
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each level")
    parser.add_argument("--start", type=float, default=50.0, help="first rate of each search")
    parser.add_argument("--tools", default=",".join(ALL), help="comma-separated: " + ",".join(ALL))
    parser.add_argument("--cpu-rate", type=float, default=100.0, help="rate of the CPU-per-request runs (0: skip)")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds at most per tool's search")
    parser.add_argument("--server", choices=SERVERS, default="nginx",
                        help="zero-delay reference server: nginx (native, default) or scripted (Python, aiohttp)")  # fmt: skip
    args = parser.parse_args()
    tools = [t for t in args.tools.split(",") if t]

    versions = {"surgelab": __version__}
    ready = []
    for tool in tools:
        if tool.startswith("surgelab"):
            ready.append(tool)
            continue
        ok, info = ensure(tool.partition("-")[0])
        versions[tool.partition("-")[0]] = info if ok else f"not measured: {info}"
        if ok:
            ready.append(tool)
    print(f"machine: {machine()}; load average at start {load_average()}")
    for tool, info in versions.items():
        print(f"  {tool}: {info}")

    results: dict = {"machine": machine(), "versions": versions, "seconds": args.seconds, "tools": {}, "cpu": []}
    with tempfile.TemporaryDirectory() as tmp, reference_server(args.server) as url:
        base = url[: -len("/v1")]
        results["server"] = describe(args.server)
        print(f"server: {results['server']} at {base}")
        work = Path(tmp)
        ref = run_wrk(base, 5)
        results["wrk_before"] = {k: v for k, v in ref.items() if k != "raw"}
        print(f"wrk (closed loop, 32 connections, 5 s): {ref.get('rps', 0):.0f} req/s, {ref.get('errors', 0)} errors")
        print()
        print(HEADER + "  note")
        for tool in ready:
            ceiling, levels = search(tool, base, args.seconds, args.start, work, time.monotonic() + args.budget)
            results["tools"][tool] = {"ceiling": ceiling, "criterion": levels[0].criterion if levels else "",
                                      "levels": [asdict(lv) for lv in levels]}  # fmt: skip
            print(f"{'':>14} => {tool} ceiling {ceiling:.0f} req/s (criterion: {results['tools'][tool]['criterion']})")
        if args.cpu_rate > 0:
            print()
            print(f"client CPU per 1,000 requests at {args.cpu_rate:g} req/s (marginal, 4 s vs 12 s runs):")
            for tool in [t for t in ready if not t.endswith("-achieved")]:
                row = cpu_per_1000(tool, base, args.cpu_rate, work, 4.0, 12.0)
                results["cpu"].append(row)
                print(f"  {tool:>10}: {row['cpu_s_per_1000']:.2f} CPU s / 1,000 requests")
        ref = run_wrk(base, 5)
        results["wrk_after"] = {k: v for k, v in ref.items() if k != "raw"}
    results["load_average_end"] = load_average()

    print()
    t = results["tools"]
    ratios: dict = {}
    ceilings = {k: v["ceiling"] for k, v in t.items()}
    for tool, c in ceilings.items():
        print(f"{tool:>10}: {c:7.0f} req/s ({t[tool]['criterion']})")
    wrk = max(results["wrk_before"].get("rps", 0), results["wrk_after"].get("rps", 0))
    print(f"{'wrk':>10}: {wrk:7.0f} req/s (closed loop: what this server and wrk reach together here)")
    # like with like: each criterion's best Python peer
    crit = {k: v["criterion"] for k, v in t.items()}
    for mine, criterion in (("surgelab1", "lag"), ("surgelab1-achieved", "achieved")):
        peers = {k: c for k, c in ceilings.items() if not k.startswith("surgelab") and crit[k] == criterion}
        if mine in ceilings and peers:
            best = max(peers.items(), key=lambda kv: kv[1])
            ratio = ceilings[mine] / best[1] if best[1] else float("inf")
            ratios[f"{mine}_over_best_peer"] = {"peer": best[0], "ratio": ratio, "criterion": criterion}
            print(
                f"surgelab 1 worker / best Python peer by the {criterion} criterion ({best[0]}): {ratio:.2f}x (target >= 2)"
            )
    if "surgelab1" in ceilings and "surgelab2" in ceilings and ceilings["surgelab1"]:
        ratios["surgelab2_over_surgelab1"] = ceilings["surgelab2"] / ceilings["surgelab1"]
        print(f"surgelab 2 workers / 1 worker: {ratios['surgelab2_over_surgelab1']:.2f}x (target >= 1.6)")
    if "surgelab1" in ceilings and wrk:
        ratios["surgelab1_over_wrk"] = ceilings["surgelab1"] / wrk
        print(f"surgelab 1 worker / wrk: {ratios['surgelab1_over_wrk']:.2f}")
    results["ratios"] = ratios
    BENCH.mkdir(parents=True, exist_ok=True)
    (BENCH / "peers_ceiling.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"load average at end {results['load_average_end']}; raw levels in {BENCH / 'peers_ceiling.json'}")


if __name__ == "__main__":
    main()
