"""Distributed load rehearsed on one machine: a two-node Ray cluster with a node killed mid-run,
and the overhead of worker processes against Ray actors at the same rate.

``rehearsal``: a head (``ray start --head``) and a second node (``ray start --address``), each
with its own resources and temp dir, on loopback; ``surgelab run --ray ADDR --workers 4``
against the scripted server (shards spread over both nodes, clock offsets recorded per node);
the second node's raylet is killed with SIGKILL mid-run. Prints where each shard ran, each
node's clock offset, what the run recorded as lost and why, and the exit code.

``overhead``: the same open-loop rate through ``--workers N`` and through a one-node Ray
cluster with N actors: client CPU per request (the driver plus every worker process or
actor), schedule lag P99, and the bytes per record that travel back (Ray's Arrow IPC pulls;
worker processes write their parts to the run directory and send none back).

    PYTHONPATH=src python benchmarks/distributed.py rehearsal [--rate 40 --seconds 30 --kill-at 10]
    PYTHONPATH=src python benchmarks/distributed.py overhead [--rate 100 --seconds 15 --workers 2]

Every Ray process is started here by ``ray start --block`` and stopped by SIGTERM to that
process (which stops what it started), leftovers by their own pid: never ``ray stop``, which
would stop every Ray instance on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from surgelab.process import free_port
from surgelab.testing.process import ScriptedServerProcess

RAY = str(Path(sys.executable).with_name("ray"))


def _token_auth(temp_dir: Path) -> None:
    """Ray's token authentication with a token of this rehearsal's own, for every process it starts
    (the nodes and the surgelab driver inherit the environment)."""
    token = temp_dir / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc), deepest last."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
                frontier.append(int(entry))
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class RayNode:
    """One ``ray start --block`` on loopback, its own temp dir; stopped by SIGTERM, leftovers by pid."""

    def __init__(self, temp_dir: Path, port: int, resource: str, head: bool, cpus: int = 1) -> None:
        self.log = temp_dir / f"{resource}.log"
        cmd = [RAY, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
               f"--resources={json.dumps({resource: 1})}", f"--temp-dir={temp_dir}", "--disable-usage-stats"]  # fmt: skip
        cmd += [f"--port={port}", "--head", "--include-dashboard=false"] if head else [f"--address=127.0.0.1:{port}"]
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while b"Ray runtime started" not in self.log.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start failed: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)
        self.pids = _children(self.proc.pid)

    def raylet(self) -> int:
        return next(pid for pid in _children(self.proc.pid) if _comm(pid) == "raylet")

    def stop(self) -> None:
        self.pids = sorted(set(self.pids) | set(_children(self.proc.pid)))
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for pid in self.pids:  # only what this node started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _surgelab(url: str, out: Path, rate: float, seconds: float, workers: int, ray: str | None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "surgelab", "run", "--url", url, "--model", "ok", "--rate", str(rate), "--arrival",
           "constant", "--duration", f"{seconds:g}s", "--max-tokens", "8", "--workers", str(workers), "--out", str(out),
           "-q", "--set", "output.flush_interval=0.5s"]  # fmt: skip
    if ray:
        cmd += ["--ray", ray]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rehearsal(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="sl-ray-") as tmp, ScriptedServerProcess(0.05, 0.01) as server:
        tmp_path, port = Path(tmp), free_port()
        _token_auth(tmp_path)
        started = time.monotonic()
        head = RayNode(tmp_path, port, "head", head=True)
        second = None
        try:
            second = RayNode(tmp_path, port, "node2", head=False)
            print(f"cluster: head and node2 up in {time.monotonic() - started:.0f} s on 127.0.0.1:{port}")
            out = tmp_path / "run"
            proc = _surgelab(server.base_url, out, args.rate, args.seconds, args.workers, f"127.0.0.1:{port}")
            while not (out / "run.json").exists() or "ray" not in json.loads((out / "run.json").read_text()):
                if proc.poll() is not None:
                    raise RuntimeError(proc.communicate()[1][-3000:])
                time.sleep(0.2)
            nodes = json.loads((out / "run.json").read_text())["ray"]["nodes"]
            time.sleep(2 + args.kill_at)  # the run starts 2 s after the offsets are measured
            raylet = second.raylet()
            os.kill(raylet, signal.SIGKILL)
            killed = time.monotonic()
            print(f"killed node2's raylet (pid {raylet}) about {args.kill_at:g} s into the run")
            _, err = proc.communicate(timeout=args.seconds + 300)
            print(f"surgelab exit code {proc.returncode} ({time.monotonic() - killed:.0f} s after the kill)")
            tail = [line for line in err.splitlines() if "Traceback" in line or "Error" in line]
            print("traceback in its output:", "yes" if any("Traceback" in line for line in tail) else "no")
            info = json.loads((out / "run.json").read_text())
            summary = json.loads((out / "summary.json").read_text())
        finally:
            if second is not None:
                second.stop()
            head.stop()
    print("\n| worker | node | host | clock offset (ms) | round trip (ms) | records pulled | fate |")
    print("|---|---|---|---|---|---|---|")
    lost = {loss["worker"]: loss for loss in info.get("worker_losses", [])}
    for k, node in enumerate(nodes):
        back = info["ray"].get("records_back", [{}] * len(nodes))[k]
        fate = f"died at {lost[k]['died_at_s']:.1f} s ({lost[k]['cause']})" if k in lost else "finished"
        print(f"| {k} | {node['node_id'][:8]} | {node['host']} | {node['offset_ms']:+.3f} "
              f"| {node['rtt_ms']:.2f} | {back.get('rows')} | {fate} |")  # fmt: skip
    req = summary["requests"]
    planned = int(args.rate * args.seconds)
    print(f"\nplanned {planned}, recorded {req['scheduled']}: ok {req['ok']}, failed {req['failed']}, lost {req['lost']}")
    print("valid:", summary["validity"]["valid"], "|", "; ".join(summary["validity"]["reasons"]))
    print("stop reason:", summary["stop_reason"])


def overhead(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="sl-ray-") as tmp, ScriptedServerProcess(0.0, 0.0) as server:
        tmp_path = Path(tmp)
        _token_auth(tmp_path)
        for layout in ("workers", "ray"):
            out = tmp_path / layout
            head = None
            try:
                if layout == "ray":
                    port = free_port()
                    head = RayNode(tmp_path, port, "head", head=True, cpus=args.workers)
                proc = _surgelab(server.base_url, out, args.rate, args.seconds, args.workers,
                                 f"127.0.0.1:{port}" if layout == "ray" else None)  # fmt: skip
                _, err = proc.communicate(timeout=args.seconds + 300)
                if proc.returncode not in (0, 3):
                    raise RuntimeError(err[-3000:])
            finally:
                if head is not None:
                    head.stop()
            info = json.loads((out / "run.json").read_text())
            summary = json.loads((out / "summary.json").read_text())
            n = summary["requests"]["scheduled"]
            back = info.get("ray", {}).get("records_back", [])
            shards = info.get("worker_cpu_s") or [b["actor_cpu_s"] for b in back]
            rows_back, bytes_back = sum(b["rows"] for b in back), sum(b["bytes"] for b in back)
            name = f"--workers {args.workers}" if layout == "workers" else f"--ray, {args.workers} actors"
            rows.append(
                (name, n, 1e3 * info["driver_cpu_s"] / n, 1e3 * sum(c or 0 for c in shards) / n,
                 summary["schedule_lag_ms"]["p99"], bytes_back / rows_back if rows_back else 0.0,
                 summary["throughput"]["requests_per_s"])  # fmt: skip
            )
    print(f"\n{args.rate:g} req/s for {args.seconds:g} s, zero-delay scripted server, 8 output tokens, loopback")
    print("| layout | requests | driver CPU per request (ms) | workers' CPU per request (ms) | lag P99 (ms) "
          "| bytes per record back | achieved req/s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, n, driver_ms, shard_ms, lag, per_record, achieved in rows:
        print(f"| {name} | {n} | {driver_ms:.2f} | {shard_ms:.2f} | {lag:.2f} | {per_record:.0f} | {achieved:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("rehearsal", "overhead"))
    parser.add_argument("--rate", type=float)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--kill-at", type=float, default=10.0, help="rehearsal: seconds into the run")
    args = parser.parse_args()
    if args.what == "rehearsal":
        args.rate, args.seconds, args.workers = args.rate or 40, args.seconds or 30, args.workers or 4
        rehearsal(args)
    else:
        args.rate, args.seconds, args.workers = args.rate or 100, args.seconds or 15, args.workers or 2
        overhead(args)


if __name__ == "__main__":
    main()
