"""The transcription rate one worker can hold, when making the audio is part of the client's work.

Each transcription request carries a WAV clip made by the client (``workload/media.py``). This
drives a zero-delay transcription server (its own process: it reads the upload and answers
``{"text": …}`` at once) with one worker at rising constant rates, 12 s clips at 16 kHz
(384 KB, the mean of examples/mixed-production.yaml), and reports the highest rate sustained
within 5 % with no failures and schedule lag P99 under ``--max-lag-ms`` (50 ms: the bound past
which a run is marked invalid, ``validity.max_lag_p99``; ``surgelab calibrate`` uses 10 ms on a
quiet machine): climb ×1.5 from ``--start`` until a level fails, then bisect three times.

    python benchmarks/transcription_rate.py [--seconds 4] [--start 10] [--clip 12] [--max-lag-ms 50]

Run it with ``PYTHONPATH`` pointing at another checkout's ``src`` to measure that one (before
and after a change). The server and the client share the machine's cores: the figure is a floor.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web


def _serve(port: int) -> None:
    from surgelab.testing.serving import run_until_interrupted, serve_app

    async def transcribe(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"text": "hello there"})

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post("/v1/audio/transcriptions", transcribe)
    app.router.add_get("/v1/models", lambda r: web.json_response({"data": [{"id": "whisper"}]}))
    run_until_interrupted(serve_app(app, "127.0.0.1", port))


def _level(url: str, rate: float, seconds: float, clip: float, work: Path) -> tuple[float, float, float, int]:
    from surgelab.aio import run_async
    from surgelab.runner.backends import backend_for
    from surgelab.scenario.loader import build_scenario

    scenario = build_scenario(
        {
            "target": {"url": url, "model": "whisper"},
            "load": {"rate": rate, "arrival": "constant", "duration": f"{seconds}s", "warmup": "1s",
                     "max_in_flight": 10_000},
            "workload": {"mix": [{"name": "listen", "kind": "transcription", "audio": {"seconds": clip}}]},
            "validity": {"allow_drops": True},
        },
        source="benchmark",
    )  # fmt: skip
    summary = run_async(backend_for(scenario, workers=1).run(scenario, work / f"rate-{rate:.1f}")).summary
    lag = summary["schedule_lag_ms"]
    failed = summary["requests"]["failed"] + summary["requests"]["dropped"]
    return summary["throughput"]["requests_per_s"], lag["p50"] or 0.0, lag["p99"] or 0.0, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="duration of each level")
    parser.add_argument("--start", type=float, default=10.0, help="first rate (req/s)")
    parser.add_argument("--clip", type=float, default=12.0, help="audio seconds per request")
    parser.add_argument("--max", type=float, default=2000.0, help="stop climbing here")
    parser.add_argument("--max-lag-ms", type=float, default=50.0, help="schedule lag P99 bound of a sustained level")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args()
    if args.serve is not None:
        _serve(args.serve)
        return

    from surgelab import __file__ as where
    from surgelab.process import ListeningChild

    print(f"surgelab from {Path(where).parent}")
    cmd = [sys.executable, __file__, "--serve", "0"]
    with (
        ListeningChild(cmd, label="the transcription server", startup_timeout=20) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        url = server.root_url + "/v1"

        def sustained(rate: float) -> bool:
            started = time.perf_counter()
            achieved, p50, p99, failed = _level(url, rate, args.seconds, args.clip, Path(tmp))
            ok = achieved >= 0.95 * rate and p99 < args.max_lag_ms and failed == 0
            print(f"  {rate:8.1f} req/s → {achieved:8.1f} achieved, lag p50 {p50:7.2f} p99 {p99:8.2f} ms, {failed} failed"
                  f"{'' if ok else '  (not sustained)'}  [{time.perf_counter() - started:.0f} s]", flush=True)  # fmt: skip
            return ok

        low, high = 0.0, args.start
        while high <= args.max and sustained(high):
            low, high = high, high * 1.5
        for _ in range(3):
            if low == 0.0:
                break
            middle = (low + high) / 2
            low, high = (middle, high) if sustained(middle) else (low, middle)
    print(f"transcription rate one worker holds ({args.clip:g} s clips): {low:.0f} req/s")


if __name__ == "__main__":
    main()
