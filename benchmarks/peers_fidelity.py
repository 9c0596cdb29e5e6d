"""Timing fidelity against the peer tools: each tool's reported TTFT/ITL/E2E against a known truth.

A truth server (``surgelab.testing.lean_server``, its own process, loopback) sends the
first token 200 ms after a request arrives and one more every 20 ms, on absolute deadlines,
16 tokens in all: nominally TTFT 200 ms, ITL 20 ms, E2E 200 + 15 x 20 = 500 ms. It is an
asyncio protocol with the httptools parser and no framework, so it stamps a request's
arrival when its first bytes are read from the socket and each token just before it is written; its
timers are not exact (a wake-up lands up to a millisecond off), so the truth each tool is
judged against is those stamps for that tool's requests, and the nominal figures
are printed beside it. Every tool runs at 50 requests/s (constant
arrivals where the tool has them) for ``--seconds``; the figures are what each tool itself
reports (its summary or its per-request export), never recomputed by us from raw times.

  * ITL: surgelab reports the gaps between tokens; GuideLLM and AIPerf report a per-request
    average inter-token latency; ``vllm bench serve`` reports the gaps. All should be 20 ms.
  * Locust measures only the whole response (E2E); it reports no TTFT or ITL.

    python benchmarks/peers_fidelity.py [--rate 50] [--seconds 10] [--tools surgelab,guidellm,aiperf,locust,vllm]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from peers_common import BENCH, RUNNERS, _pcts, ensure, load_average, machine, run_locust, run_surgelab

from surgelab import __version__
from surgelab.testing.process import ScriptedServerProcess

TTFT_S, ITL_S, TOKENS = 0.200, 0.020, 16
TRUTH = {"ttft": TTFT_S * 1000, "itl": ITL_S * 1000, "e2e": (TTFT_S + ITL_S * (TOKENS - 1)) * 1000}
ALL = ("surgelab", "guidellm", "aiperf", "locust", "vllm")


@contextlib.contextmanager
def truth_server(ttft: float, itl: float) -> Iterator[str]:
    """The lean server (it stamps arrival and every token) as a subprocess; yields its root URL."""
    with ScriptedServerProcess(ttft, itl, startup_timeout=30, lean=True) as server:
        yield server.root_url


def server_truth(base: str) -> dict[str, list[float]]:
    with urllib.request.urlopen(base + "/truth", timeout=30) as resp:
        return json.loads(resp.read())


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tools", default=",".join(ALL))
    args = parser.parse_args()
    versions = {"surgelab": __version__}
    tools = []
    for tool in args.tools.split(","):
        if tool == "surgelab":
            tools.append(tool)
            continue
        ok, info = ensure(tool)
        versions[tool] = info if ok else f"not measured: {info}"
        if ok:
            tools.append(tool)
    print(f"machine: {machine()}; load average at start {load_average()}")
    print(f"truth: TTFT {TRUTH['ttft']:.1f} ms, ITL {TRUTH['itl']:.1f} ms, E2E {TRUTH['e2e']:.1f} ms; "
          f"{args.rate:g} req/s for {args.seconds:g} s")  # fmt: skip
    rows = {}
    with tempfile.TemporaryDirectory() as tmp, truth_server(TTFT_S, ITL_S) as base:
        work = Path(tmp)
        for tool in tools:
            seen = len(server_truth(base)["ttft_ms"])
            if tool == "surgelab":
                lv = run_surgelab(base, args.rate, args.seconds, work, tokens=TOKENS)
            elif tool == "locust":  # a request lasts 0.5 s: one request per second per user
                lv = run_locust(base, args.rate, args.seconds, work, tokens=TOKENS, per_user=1.0)
            else:
                lv = RUNNERS[tool](base, args.rate, args.seconds, work, tokens=TOKENS)
            truth = server_truth(base)
            server = {"ttft": _pcts(truth["ttft_ms"][seen:]), "itl": _pcts(truth["itl_ms"][seen:]),
                      "e2e": _pcts(truth["e2e_ms"][seen:])}  # fmt: skip
            rows[tool] = {"achieved": lv.achieved, "completed": lv.completed, "errors": lv.errors,
                          "timings": lv.timings, "server": server, "note": lv.note, "load": load_average()[0]}  # fmt: skip
            print(f"  {tool}: {lv.completed} ok, {lv.errors} errors, {lv.achieved:.1f} req/s ({lv.note})", flush=True)
    print()
    print("errors: the tool's figure minus the server's own measurement of the same requests (and minus nominal)")
    print(f"{'tool':>10} {'metric':>6} {'p50 ms':>9} {'server':>9} {'err p50':>8} {'mean ms':>9} {'server':>9} "
          f"{'err mean':>8} {'vs nominal p50':>15}")  # fmt: skip
    for tool, row in rows.items():
        for metric in ("ttft", "itl", "e2e"):
            t, srv = row["timings"].get(metric) or {}, row["server"].get(metric) or {}
            p50, mean = t.get("p50"), t.get("mean")
            if p50 is None and mean is None:
                print(f"{tool:>10} {metric:>6} {'not reported':>12}")
                continue

            def fmt(v: float | None) -> str:
                return f"{v:9.2f}" if v is not None else f"{'-':>9}"

            def err(v: float | None, ref: float | None) -> str:
                return f"{v - ref:+8.2f}" if v is not None and ref is not None else f"{'-':>8}"

            print(f"{tool:>10} {metric:>6} {fmt(p50)} {fmt(srv.get('p50'))} {err(p50, srv.get('p50'))} {fmt(mean)} "
                  f"{fmt(srv.get('mean'))} {err(mean, srv.get('mean'))} {err(p50, TRUTH[metric]):>15}")  # fmt: skip
    BENCH.mkdir(parents=True, exist_ok=True)
    out = {"machine": machine(), "versions": versions, "truth_ms": TRUTH, "rate": args.rate, "seconds": args.seconds,
           "tools": rows, "load_average_end": load_average()}  # fmt: skip
    (BENCH / "peers_fidelity.json").write_text(json.dumps(out, indent=2, default=str))
    print(f"load average at end {out['load_average_end']}; raw figures in {BENCH / 'peers_fidelity.json'}")


if __name__ == "__main__":
    main()
