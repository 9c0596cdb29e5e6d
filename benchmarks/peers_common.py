"""Shared by the peer benchmarks: each peer tool in its own virtual environment, driven at a fixed rate.

Every peer is installed from PyPI into ``~/.cache/surgelab-bench/venvs/<tool>`` (created with
``python -m venv`` and reused across runs) and run as a subprocess against a loopback server.
GuideLLM and AIPerf count tokens with a Hugging Face tokenizer; nothing may be fetched from a
hub here, so a small word-level tokenizer is built locally (``tokenizers``, already a
dependency of both) and passed to them by path.

Each ``run_*`` returns a :class:`Level` with what the tool itself reported: requests completed,
errors, the achieved rate, and where the tool records it, each request's scheduled and actual
send time (schedule lag). Token timings (TTFT/ITL/E2E, milliseconds) are what the tool printed
or exported, read back from its own output files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from native_server import ensure_debian

BENCH = Path.home() / ".cache" / "surgelab-bench"
VENVS = BENCH / "venvs"
HERE = Path(__file__).resolve().parent
PROMPT_TOKENS = 64
LAG_P99_MS = 10.0

# what each tool installs from PyPI (torch pinned to the CPU build where a tool pulls torch in)
SPECS = {
    "guidellm": ["guidellm"],
    "aiperf": ["aiperf"],
    "locust": ["locust"],
    "vllm": ["vllm"],
}
EXECUTABLE = {"guidellm": "guidellm", "aiperf": "aiperf", "locust": "locust", "vllm": "vllm"}


@dataclass
class Level:
    tool: str
    rate: float
    achieved: float = 0.0
    completed: int = 0
    errors: int = 0
    lag_p50_ms: float | None = None
    lag_p99_ms: float | None = None
    note: str = ""
    timings: dict = field(default_factory=dict)  # ttft/itl/e2e -> {"p50": ms, "mean": ms}
    use_lag: bool = True  # False: judge by the "achieved" criterion even where lag is known

    @property
    def criterion(self) -> str:
        return "lag" if self.lag_p99_ms is not None and self.use_lag else "achieved"

    @property
    def sustained(self) -> bool:
        ok = self.achieved >= 0.95 * self.rate and self.errors == 0 and self.completed > 0
        if self.criterion == "lag":
            ok = ok and self.lag_p99_ms < LAG_P99_MS
        return ok

    def line(self) -> str:
        lag = f"{self.lag_p50_ms:7.2f} {self.lag_p99_ms:8.2f}" if self.lag_p99_ms is not None else f"{'-':>7} {'-':>8}"
        return (f"{self.tool:>14} {self.rate:8.0f} {self.achieved:9.1f} {lag} {self.errors:6d} "
                f"{'yes' if self.sustained else 'no':>4}  {self.note}")  # fmt: skip


HEADER = f"{'tool':>14} {'offered':>8} {'achieved':>9} {'lag p50':>7} {'lag p99':>8} {'errors':>6} {'ok':>4}"


# -- installation ------------------------------------------------------------------------------


def venv_bin(tool: str) -> Path:
    return VENVS / tool / "bin"


def ensure(tool: str, timeout: float = 1500) -> tuple[bool, str]:
    """Install ``tool`` into its own venv unless already there; (ready, version or why not)."""
    exe = venv_bin(tool) / EXECUTABLE[tool]
    if not exe.exists():
        VENVS.mkdir(parents=True, exist_ok=True)
        log = BENCH / "logs" / f"install-{tool}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        if not (VENVS / tool / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENVS / tool)], check=True)
        with open(log, "a") as out:
            try:
                proc = subprocess.run([str(venv_bin(tool) / "pip"), "install", "-q", *SPECS[tool]],
                                      stdout=out, stderr=subprocess.STDOUT, timeout=timeout)  # fmt: skip
            except subprocess.TimeoutExpired:
                return False, f"pip install {' '.join(SPECS[tool])} did not finish in {timeout:.0f} s (see {log})"
        if proc.returncode != 0 or not exe.exists():
            tail = [line for line in log.read_text(errors="replace").splitlines() if "is ignored" not in line][-3:]
            return False, f"pip install {' '.join(SPECS[tool])} failed: {' | '.join(tail)[:400]}"
    return True, version(tool)


def version(tool: str) -> str:
    py = venv_bin(tool) / "python"
    dist = {"guidellm": "guidellm", "aiperf": "aiperf", "locust": "locust", "vllm": "vllm"}[tool]
    code = f"import importlib.metadata as m; print(m.version('{dist}'))"
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "?"


def tokenizer_dir() -> Path:
    """A local word-level Hugging Face tokenizer (built once with the guidellm venv's ``tokenizers``)."""
    path = BENCH / "tokenizer"
    if (path / "tokenizer.json").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)

    def has_tokenizers(tool: str) -> bool:
        py = venv_bin(tool) / "python"
        return py.exists() and subprocess.run([str(py), "-c", "import tokenizers"], capture_output=True).returncode == 0

    tool = next((t for t in ("aiperf", "guidellm") if has_tokenizers(t)), None)
    if tool is None:
        raise RuntimeError("no peer venv with the tokenizers package")
    py = venv_bin(tool) / "python"
    from surgelab.tokenizer import VOCABULARY  # the words the scripted server streams

    (path / "words.json").write_text(json.dumps(list(VOCABULARY)))
    code = r"""
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
words = ["[UNK]", "[PAD]", "<s>", "</s>"] + json.load(open(sys.argv[1] + "/words.json"))
vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")
out = sys.argv[1]
tok.save(out + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "pad_token": "[PAD]",
           "bos_token": "<s>", "eos_token": "</s>", "model_max_length": 1000000}, open(out + "/tokenizer_config.json", "w"))
json.dump({"model_type": "llama"}, open(out + "/config.json", "w"))
"""
    subprocess.run([str(py), "-c", code, str(path)], check=True, timeout=120)
    return path


# -- running a tool ---------------------------------------------------------------------------


def _no_output(path: Path, proc: subprocess.CompletedProcess, level: Level) -> bool:
    """True (and the level says why, from the tool's last output) when the tool left no result file."""
    if path.exists():
        return False
    level.note = "no output: " + proc.stdout[-300:].replace("\n", " | ")
    return True


def _run(
    cmd: list[str], timeout: float, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Run a peer in its own process group; on timeout the whole group is ended."""
    # AIPerf's offline mode cannot load a tokenizer from a local folder, so offline is per tool
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "TERM": "dumb", **(env or {})}
    full_env.pop("VIRTUAL_ENV", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                            cwd=cwd, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        out = (out or "") + "\n[timed out]"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def _pcts(values: list[float]) -> dict:
    if not values:
        return {}
    xs = sorted(values)

    def q(p: float) -> float:
        k = (len(xs) - 1) * p
        f = int(k)
        return xs[f] + (xs[min(f + 1, len(xs) - 1)] - xs[f]) * (k - f)

    return {"p50": q(0.5), "p99": q(0.99), "mean": sum(xs) / len(xs)}


def run_wrk(base: str, seconds: float, connections: int = 32) -> dict:
    """wrk (closed loop, as fast as it goes): the physical reference for this server on this machine.

    wrk comes from Debian; it is installed with apt-get when missing (as root), like nginx.
    """
    exe, why = ensure_debian("wrk", ("wrk",))
    if exe is None:
        return {"error": why}
    cmd = [exe, "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(HERE / "peers" / "wrk_stream.lua"),
           f"{base}/v1/chat/completions"]  # fmt: skip
    out = _run(cmd, seconds + 30).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(m.group(1)) if m else 0.0, "errors": int(errors.group(1)) if errors else 0, "raw": out}


def run_locust(base: str, rate: float, seconds: float, work: Path, tokens: int = 16, per_user: float = 5.0) -> Level:
    users = max(1, min(int(rate // per_user), 500))  # each user at rate/users requests per second
    per_user = rate / users
    prefix = work / f"locust-{rate:.0f}"
    starts_file = work / f"locust-{rate:.0f}-starts.json"
    cmd = [str(venv_bin("locust") / "locust"), "-f", str(HERE / "peers" / "locustfile.py"), "--headless",
           "-u", str(users), "-r", str(max(users, 1) * 10), "-t", f"{seconds:g}s", "-H", base, "--only-summary",
           "--json-file", str(prefix), "--loglevel", "ERROR", "--stop-timeout", "5"]  # fmt: skip
    started = time.monotonic()
    env = {"LOCUST_PER_USER": str(per_user), "LOCUST_MAX_TOKENS": str(tokens), "LOCUST_STARTS": str(starts_file)}
    proc = _run(cmd, seconds + 90, env=env)
    level = Level("locust", rate)
    path = Path(str(prefix) + ".json")
    if _no_output(path, proc, level):
        return level
    stats = [s for s in json.loads(path.read_text()) if s.get("name") == "/v1/chat/completions"]
    if not stats:
        level.note = "no requests"
        return level
    s = stats[0]
    level.completed = s["num_requests"] - s["num_failures"]
    level.errors = s["num_failures"]
    span = (s["last_request_timestamp"] or 0) - (s["start_time"] or 0)
    level.achieved = s["num_requests"] / max(span, seconds * 0.5) if span > 0 else 0.0
    times = s.get("response_times", {})  # {ms rounded: count}
    values = [float(k) for k, c in times.items() for _ in range(c)]
    level.timings = {"e2e": _pcts(values)}
    if starts_file.exists():  # each user against its own schedule: first start + k / per-user rate
        lags = [max(0.0, (t - (starts[0] + k / per_user)) * 1000)
                for starts in json.loads(starts_file.read_text()) for k, t in enumerate(sorted(starts))]  # fmt: skip
        lag = _pcts(lags)
        level.lag_p50_ms, level.lag_p99_ms = lag["p50"] or 0.0, lag["p99"] or 0.0
    level.note = f"{users} users x {per_user:.2f}/s ({time.monotonic() - started:.0f} s wall)"
    return level


def _lag_from_sends(sends_s: list[float], t0_s: float, rate: float) -> tuple[float, float]:
    """Schedule lag of the k-th send against the k-th intended time t0 + k/rate (constant arrivals), ms."""
    sends = sorted(sends_s)
    lags = [max(0.0, (s - (t0_s + k / rate)) * 1000) for k, s in enumerate(sends)]
    p = _pcts(lags)
    return p["p50"], p["p99"]


def run_guidellm(base: str, rate: float, seconds: float, work: Path, tokens: int = 16) -> Level:
    """GuideLLM ``run`` with a scenario file: constant profile at ``rate``, bounded by max_duration.

    GuideLLM records each request's targeted start and actual start, so its schedule lag is
    its own ``request_dispatch_delay``.
    """
    out_dir = work / f"guidellm-{rate:.0f}"
    out_dir.mkdir(parents=True, exist_ok=True)
    scenario = {
        "metadata": {"name": "surgelab-peer", "description": "fixed-rate streaming chat"},
        "spec": {
            "backend": {"kind": "openai_http", "target": base, "model": "ok", "request_format": "/v1/chat/completions",
                        "stream": True, "http2": False, "validate_backend": False, "timeout": 60},
            "profile": {"kind": "constant", "rate": [rate]},
            "tokenizer": {"kind": "huggingface_auto", "model": str(tokenizer_dir())},
            "data": [{"kind": "synthetic_text", "prompt_tokens": PROMPT_TOKENS, "output_tokens": tokens}],
            "constraints": [{"kind": "max_duration", "seconds": seconds}],
            "outputs": [{"kind": "json", "path": str(out_dir / "out.json")}],
        },
    }  # fmt: skip
    (out_dir / "scenario.json").write_text(json.dumps(scenario))
    cmd = [str(venv_bin("guidellm") / "guidellm"), "run", "-c", str(out_dir / "scenario.json"), "--disable-progress"]
    started = time.monotonic()
    proc = _run(cmd, seconds + 240, env={"HF_HUB_OFFLINE": "1"})
    level = Level("guidellm", rate)
    path = out_dir / "out.json"
    if _no_output(path, proc, level):
        return level
    bench = json.loads(path.read_text())["benchmarks"][0]
    reqs = bench["requests"]
    ok, errored, incomplete = reqs.get("successful") or [], reqs.get("errored") or [], reqs.get("incomplete") or []
    level.completed, level.errors = len(ok), len(errored)
    duration = bench.get("duration") or seconds
    level.achieved = len(ok) / duration if duration else 0.0
    delays = [r["request_dispatch_delay"] * 1000 for r in ok + errored if r.get("request_dispatch_delay") is not None]
    if delays:
        p = _pcts(delays)
        level.lag_p50_ms, level.lag_p99_ms = p["p50"], p["p99"]
    level.timings = {
        "ttft": _pcts([r["time_to_first_token_ms"] for r in ok if r.get("time_to_first_token_ms") is not None]),
        "itl": _pcts([r["inter_token_latency_ms"] for r in ok if r.get("inter_token_latency_ms") is not None]),
        "e2e": _pcts([r["request_latency"] * 1000 for r in ok if r.get("request_latency") is not None]),
    }
    level.note = f"{len(incomplete)} incomplete, {duration:.1f} s measured ({time.monotonic() - started:.0f} s wall)"
    return level


def run_aiperf(base: str, rate: float, seconds: float, work: Path, tokens: int = 16) -> Level:
    """AIPerf ``profile`` at a constant request rate for ``seconds``.

    AIPerf exports each request's credit-issue and start times; schedule lag is the k-th
    start against the k-th intended time (first credit + k/rate).
    """
    out_dir = work / f"aiperf-{rate:.0f}"
    cmd = [str(venv_bin("aiperf") / "aiperf"), "profile", "--model", "ok", "--url", base, "--endpoint-type", "chat",
           "--streaming", "--request-rate", f"{rate:g}", "--arrival-pattern", "constant",
           "--benchmark-duration", f"{seconds:g}", "--benchmark-grace-period", "10",
           "--synthetic-input-tokens-mean", str(PROMPT_TOKENS), "--synthetic-input-tokens-stddev", "0",
           "--output-tokens-mean", str(tokens), "--output-tokens-stddev", "0", "--use-server-token-count",
           "--tokenizer", str(tokenizer_dir()), "--ui-type", "none", "--artifact-dir", str(out_dir),
           "--random-seed", "1", "--no-gpu-telemetry", "--no-server-metrics"]  # fmt: skip
    started = time.monotonic()
    proc = _run(cmd, seconds + 240)
    level = Level("aiperf", rate)
    summary, records = out_dir / "profile_export_aiperf.json", out_dir / "profile_export.jsonl"
    if _no_output(summary, proc, level):
        return level
    s = json.loads(summary.read_text())
    level.completed = int((s.get("completed_request_count") or s.get("request_count") or {}).get("avg") or 0)
    errs = s.get("error_summary") or []
    level.errors = sum(int(e.get("count", 0)) for e in errs) if isinstance(errs, list) else 0
    level.achieved = float((s.get("request_throughput") or {}).get("avg") or 0.0)
    sends, credits = [], []
    if records.exists():
        for line in records.read_text().splitlines():
            meta = json.loads(line).get("metadata", {})
            if meta.get("benchmark_phase", "profiling") == "profiling" and meta.get("request_start_ns"):
                sends.append(meta["request_start_ns"] / 1e9)
                credits.append(meta["credit_issued_ns"] / 1e9)
    if sends:
        level.lag_p50_ms, level.lag_p99_ms = _lag_from_sends(sends, min(credits), rate)

    def metric(name: str) -> dict:
        m = s.get(name) or {}
        return {"p50": m.get("p50"), "p99": m.get("p99"), "mean": m.get("avg")}

    level.timings = {"ttft": metric("time_to_first_token"), "itl": metric("inter_token_latency"),
                     "e2e": metric("request_latency")}  # fmt: skip
    level.note = f"{time.monotonic() - started:.0f} s wall"
    return level


def run_vllm(base: str, rate: float, seconds: float, work: Path, tokens: int = 16) -> Level:
    """``vllm bench serve`` with random data at ``rate`` (burstiness 1000: near-constant gamma arrivals)."""
    out_dir = work / f"vllm-{rate:.0f}"
    out_dir.mkdir(parents=True, exist_ok=True)
    n = max(1, int(rate * seconds))
    cmd = [str(venv_bin("vllm") / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", base,
           "--endpoint", "/v1/chat/completions", "--model", "ok", "--tokenizer", str(tokenizer_dir()),
           "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS), "--random-output-len", str(tokens),
           "--num-prompts", str(n), "--request-rate", f"{rate:g}", "--burstiness", "1000", "--ignore-eos",
           "--save-result", "--save-detailed", "--result-dir", str(out_dir), "--result-filename", "result.json",
           "--seed", "1", "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99"]  # fmt: skip
    started = time.monotonic()
    proc = _run(cmd, seconds + 300, env={"HF_HUB_OFFLINE": "1"})
    level = Level("vllm bench", rate)
    path = out_dir / "result.json"
    if _no_output(path, proc, level):
        return level
    r = json.loads(path.read_text())
    level.completed = int(r.get("completed") or 0)
    level.errors = n - level.completed
    level.achieved = float(r.get("request_throughput") or 0.0)
    level.timings = {
        "ttft": {"p50": r.get("median_ttft_ms"), "p99": r.get("p99_ttft_ms"), "mean": r.get("mean_ttft_ms")},
        "itl": {"p50": r.get("median_itl_ms"), "p99": r.get("p99_itl_ms"), "mean": r.get("mean_itl_ms")},
        "e2e": {"p50": r.get("median_e2el_ms"), "p99": r.get("p99_e2el_ms"), "mean": r.get("mean_e2el_ms")},
    }
    level.note = f"{n} prompts ({time.monotonic() - started:.0f} s wall)"
    return level


RUNNERS = {"guidellm": run_guidellm, "aiperf": run_aiperf, "locust": run_locust, "vllm": run_vllm}


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def machine() -> str:
    import platform

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, {platform.system()} {platform.release()}"


def run_surgelab(base: str, rate: float, seconds: float, work: Path, tokens: int = 16, workers: int = 1) -> Level:
    """``surgelab run`` (the CLI, a fresh process like every peer) at a constant open-loop rate."""
    out_dir = work / f"surgelab-w{workers}-{rate:.0f}-{time.monotonic_ns()}"
    exe = Path(sys.executable).with_name("surgelab")
    cmd = [str(exe), "run", "--url", f"{base}/v1", "--model", "ok", "--rate", f"{rate:g}", "--arrival", "constant",
           "--duration", f"{seconds:g}s", "--warmup", f"{min(1.0, seconds / 4):g}s", "--prompt-tokens",
           str(PROMPT_TOKENS), "--max-tokens", str(tokens), "--max-in-flight", "10000", "--out", str(out_dir),
           "-q", "--set", "validity.allow_drops=true", "--workers", str(workers), "--i-know-what-i-am-doing"]  # fmt: skip
    started = time.monotonic()
    proc = _run(cmd, seconds + 120)
    level = Level(f"surgelab w={workers}", rate)
    path = out_dir / "summary.json"
    if _no_output(path, proc, level):
        return level
    s = json.loads(path.read_text())
    level.completed = s["requests"]["ok"]
    level.errors = s["requests"]["failed"] + s["requests"]["dropped"]
    level.achieved = s["throughput"]["requests_per_s"]
    lag = s["schedule_lag_ms"]
    level.lag_p50_ms, level.lag_p99_ms = lag["p50"] or 0.0, lag["p99"] or 0.0
    lat = s["latency_ms"]
    level.timings = {k: {"p50": (lat.get(k) or {}).get("p50"), "p99": (lat.get(k) or {}).get("p99"),
                         "mean": (lat.get(k) or {}).get("mean")} for k in ("ttft", "itl", "e2e")}  # fmt: skip
    level.note = f"{time.monotonic() - started:.0f} s wall"
    shutil.rmtree(out_dir, ignore_errors=True)
    return level


def cpu_children() -> float:
    """User + system CPU seconds of every waited-for child process so far (``resource``)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
