"""surgelab against real engines it did not write: llama.cpp's llama-server and vLLM (CPU build).

For each engine, the runs a new user makes with default settings (keep-alive on, the default
tokenizer), each checked against the engine's own Prometheus counters read before and after:

- every request ok, and the run ends within its duration plus a few seconds;
- output tokens in the records equal the engine's generated-token counter delta, prompt tokens
  its prompt-token counter delta, and the prompts arrived at the length asked for (128);
- requests sent again on a new connection because the engine had closed a pooled one;
- client TTFT beside the engine's own: vLLM's TTFT histogram, llama.cpp's prompt-processing
  time (its counters have no TTFT; the difference is queueing, HTTP and the first decode step).

Needs llama-server built once by ``../shared/tools/realserver/setup.sh`` (~15 min) and vLLM
installed by ``ci/vllm/setup.sh`` (~3 min). Not a CI test (the vLLM part has its own CI stage).

    python benchmarks/real_engines.py [--engines llamacpp,vllm] [--results]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
REALSERVER = ROOT.parent / "shared" / "tools" / "realserver"
VLLM = ROOT / "ci" / "vllm"


@dataclass(frozen=True)
class Engine:
    name: str
    port: int
    start: list[str]
    stop: list[str]
    env: dict[str, str]
    prompt_counter: str
    output_counter: str
    server_ttft: str  # how the engine's own first-token time is read: "vllm" or "llamacpp"
    extra_body: dict | None = None  # what every request adds to its body


ENGINES = {
    "llamacpp": Engine("llama.cpp", 18090, ["bash", str(REALSERVER / "start.sh"), "18090"],
                       ["bash", str(REALSERVER / "stop.sh"), "18090"], {"NP": "4", "THREADS": "1"},
                       "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp",
                       # its prompt counter counts the tokens it processed: a cached template prefix is not
                       {"cache_prompt": False}),
    "vllm": Engine("vLLM (CPU)", 18100, ["bash", str(VLLM / "start.sh"), "18100"], ["bash", str(VLLM / "stop.sh"), "18100"],
                   {}, "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm"),
}  # fmt: skip

RUNS = {
    "closed loop, 2 users (the issue's run)": ["--concurrency", "2"],
    "open loop, 1.5 req/s": ["--rate", "1.5", "--arrival", "poisson"],
}
DURATION_S = 15


def metrics(port: int) -> dict[str, float]:
    """The engine's /metrics samples by name, label sets summed (one model per engine here)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            name = name.split("{")[0]  # one model per engine: label sets summed
            out[name] = out.get(name, 0.0) + float(value)
    return out


def server_ttft_ms(engine: Engine, before: dict[str, float], after: dict[str, float], requests: int) -> float | None:
    """The engine's own mean time to first token (vLLM), or mean prompt-processing time (llama.cpp)."""
    if engine.server_ttft == "vllm":
        count = after.get("vllm:time_to_first_token_seconds_count", 0) - before.get("vllm:time_to_first_token_seconds_count", 0)
        total = after.get("vllm:time_to_first_token_seconds_sum", 0) - before.get("vllm:time_to_first_token_seconds_sum", 0)
        return 1000 * total / count if count else None
    seconds = after.get("llamacpp:prompt_seconds_total", 0) - before.get("llamacpp:prompt_seconds_total", 0)
    return 1000 * seconds / requests if requests else None


def measure(engine: Engine, name: str, flags: list[str], out: Path) -> dict:
    spec = out.parent / f"{out.name}.yaml"
    target = {"url": f"http://127.0.0.1:{engine.port}/v1", "model": "tiny", "extra_body": engine.extra_body or {}}
    spec.write_text(json.dumps({"target": target, "load": {"concurrency": 1}}))  # JSON is YAML; the flags set the load
    before = metrics(engine.port)
    cmd = [sys.executable, "-m", "surgelab", "run", str(spec), *flags, "--duration", f"{DURATION_S}s", "--prompt-tokens", "128", "--max-tokens", "32", "--out", str(out), "-q"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DURATION_S + 120)
    wall = time.monotonic() - started
    time.sleep(1.0)  # let the engine's counters settle
    after = metrics(engine.port)
    summary = json.loads((out / "summary.json").read_text())
    records = pq.read_table(out / "records.parquet").to_pylist()
    ok = [r for r in records if r["state"] == "ok"]
    ttft = [(r["first_token_ns"] - r["sent_ns"]) / 1e6 for r in ok]
    row = {
        "engine": engine.name, "run": name, "exit": proc.returncode, "wall_s": wall,
        "scheduled": len(records), "ok": len(ok), "failed": summary["requests"]["failed"],
        "resent": summary["requests"].get("resent", 0),
        "output_records": sum(r["output_tokens"] or 0 for r in records),
        "output_engine": after[engine.output_counter] - before[engine.output_counter],
        "prompt_records": sum(r["prompt_tokens"] or 0 for r in ok),
        "prompt_engine": after[engine.prompt_counter] - before[engine.prompt_counter],
        "prompt_mean_at_server": summary["prompt_lengths"]["server_mean"],
        "tokenizer": proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else "",
        "client_ttft_ms": sum(ttft) / len(ttft) if ttft else None,
        "server_ttft_ms": server_ttft_ms(engine, before, after, len(ok)),
        "valid": summary["validity"]["valid"], "diagnosis": summary.get("diagnosis", []),
    }  # fmt: skip
    return row


def run_engine(engine: Engine) -> list[dict]:
    subprocess.run(engine.start, check=True, env={**os.environ, **engine.env})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return [measure(engine, name, flags, Path(tmp) / f"run-{k}") for k, (name, flags) in enumerate(RUNS.items())]
    finally:
        subprocess.run(engine.stop, check=False)


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| engine | run | ok / scheduled | wall (s) | resent | output tokens: records = engine | prompt tokens: records = engine | prompt mean at server | TTFT client / engine (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        server = f"{r['server_ttft_ms']:.1f}" if r["server_ttft_ms"] is not None else "–"
        client = f"{r['client_ttft_ms']:.1f}" if r["client_ttft_ms"] is not None else "–"
        mean = f"{r['prompt_mean_at_server']:.1f}" if r["prompt_mean_at_server"] is not None else "–"
        lines.append(
            f"| {r['engine']} | {r['run']} | {r['ok']} / {r['scheduled']} | {r['wall_s']:.1f} | {r['resent']} | "
            f"{r['output_records']:,} = {r['output_engine']:,.0f} | {r['prompt_records']:,} = {r['prompt_engine']:,.0f} | "
            f"{mean} | {client} / {server} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="llamacpp,vllm", help="comma-separated: llamacpp, vllm")
    parser.add_argument("--results", action="store_true", help="append the figures to benchmarks/RESULTS.md")
    args = parser.parse_args()
    rows: list[dict] = []
    for key in args.engines.split(","):
        rows += run_engine(ENGINES[key.strip()])
    lines = table(rows)
    problems = [f"{r['engine']}, {r['run']}: {k}" for r in rows for k, bad in (
        ("a request failed", r["failed"] or r["ok"] != r["scheduled"]),
        ("ran longer than its duration + 5 s", r["wall_s"] > DURATION_S + 5 + 3),  # + the start and the summary
        ("output tokens disagree with the engine", r["output_records"] != r["output_engine"]),
        ("prompt tokens disagree with the engine", r["prompt_records"] != r["prompt_engine"]),
        ("prompts not within 10 % of 128 at the server", abs((r["prompt_mean_at_server"] or 0) / 128 - 1) > 0.1),
    ) if bad]  # fmt: skip
    print("\n".join(lines))
    for r in rows:
        print(f"{r['engine']}, {r['run']}: {r['tokenizer']}; valid={r['valid']} {' '.join(r['diagnosis'])}")
    print("every check passed" if not problems else "problems:\n  " + "\n  ".join(problems))
    if args.results:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        with (ROOT / "benchmarks" / "RESULTS.md").open("a", encoding="utf-8") as f:
            f.write(f"\n### Real engines, {stamp} (`python benchmarks/real_engines.py`)\n\n" + "\n".join(lines) + "\n")
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
