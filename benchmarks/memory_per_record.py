"""Memory per recorded request: in-memory buffers, Arrow, Parquet on disk, and RSS growth in a long run.

Prints, measured in this one run on this machine:
  * ``RecordBuffer``: resident memory per record while rows are buffered (16 output tokens
    each, so 15 inter-token gaps), before they are handed over;
  * the Arrow table ``take()`` hands over, bytes per record;
  * ``records.parquet`` (zstd, as the run writes it), bytes per record on disk;
  * a real run (open loop against the zero-delay scripted server, loopback): the slope of
    resident memory after warm-up, in bytes per recorded request, and per million (records
    are flushed to disk every ``output.flush_interval``, so this should be about zero);
  * the end of a run: ``surgelab summarize`` (what every run does last: merge, summary,
    report) on that run's records replicated to ``--summary-rows`` rows and left as one part
    file per second of the run (as the flushes leave them), peak RSS against the same on the
    original run, per extra record.
Resident memory is read from ``/proc/self/statm`` and ``/proc/self/status`` (Linux).

    python benchmarks/memory_per_record.py [--records 200000] [--rate 500] [--seconds 40] [--summary-rows 1000000]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from surgelab.aio import run_async
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta
from surgelab.runner import run_scenario
from surgelab.scenario import load_scenario
from surgelab.testing.process import scripted_server

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def buffer_figures(n: int, tokens: int = 16) -> dict:
    """Fill a RecordBuffer with ``n`` realistic rows; bytes per record at each stage."""
    metas = []
    gc.collect()
    before = rss()
    buf = RecordBuffer()
    base = 1_000_000_000
    for i in range(n):
        intended = base + i * 2_000_000  # 500 req/s
        sent = intended + 150_000 + (i * 7919) % 90_000
        first = sent + 900_000 + (i * 104729) % 300_000
        times = array("q", (first + k * 45_000 + (i * k) % 5_000 for k in range(tokens)))
        out = Outcome(state=State.OK, sent_ns=sent, first_byte_ns=first - 20_000, first_token_ns=first,
                      end_ns=times[-1] + 30_000, prompt_tokens=64, output_tokens=tokens, usage_source="server",
                      http_status=200, token_ns=times, kind="chat")  # fmt: skip
        meta = RecordMeta(id=i, intended_ns=intended, warmup=False, kind="chat")
        buf.add(meta, out)
        del out, meta, times
    gc.collect()
    buffered = rss() - before
    table = buf.take()
    arrow_bytes = table.nbytes
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.parquet"
        pq.write_table(table, path, compression="zstd")
        parquet_bytes = path.stat().st_size
    del table, metas
    return {"records": n, "buffer_rss": buffered / n, "arrow": arrow_bytes / n, "parquet": parquet_bytes / n}


# ``surgelab summarize RUN`` that writes its own peak RSS (VmHWM, kB) to $SURGELAB_PEAK_FILE as it exits
_SUMMARIZE_AND_REPORT_PEAK = """
import atexit, os, sys

def _peak():
    with open("/proc/self/status") as status, open(os.environ["SURGELAB_PEAK_FILE"], "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])

atexit.register(_peak)
sys.argv = ["surgelab", "summarize", sys.argv[1]]
from surgelab.cli import main
main()
"""


def summarize_peak(run_dir: Path) -> int:
    """Peak RSS (bytes) of ``surgelab summarize run_dir`` in a fresh process.

    Read from the child's own high-water mark: ``wait4``'s ru_maxrss also counts what this
    process had resident when it spawned the child (shared until exec), hundreds of MiB here.
    """
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        env = {**os.environ, "SURGELAB_PEAK_FILE": str(peak_file)}
        proc = subprocess.run([sys.executable, "-c", _SUMMARIZE_AND_REPORT_PEAK, str(run_dir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"surgelab summarize {run_dir} exited {proc.returncode}")
        return int(peak_file.read_text()) * 1024


def as_parts(table: pa.Table, run_dir: Path, rows_per_part: int) -> None:
    """Leave ``table`` in ``run_dir`` as a run does before its last step: one part file per flush, not yet merged."""
    (run_dir / "records.parquet").unlink(missing_ok=True)
    for name in ("summary.json", "report.html"):
        (run_dir / name).unlink(missing_ok=True)
    parts = run_dir / "records.parts"
    parts.mkdir()
    for k, start in enumerate(range(0, table.num_rows, rows_per_part)):
        pq.write_table(table.slice(start, rows_per_part), parts / f"part-{k:06d}.parquet", compression="zstd")


def summary_figures(run_dir: Path, rows: int, work: Path, rows_per_part: int) -> dict:
    """End-of-run memory: the run's records replicated to ``rows`` rows, summarised, against the original.

    Both are left as record parts of ``rows_per_part`` rows (what one flush writes), so that
    ``surgelab summarize`` does all a run does at its end: merge the parts, summarise, report.
    """
    table = pq.read_table(run_dir / "records.parquet")
    n = table.num_rows
    copies, parts = -(-rows // n), []
    span = int(pc.max(table["intended_ns"]).as_py()) + 1_000_000
    shifted = ("id", "intended_ns", "sent_ns", "first_byte_ns", "first_token_ns", "end_ns")
    for k in range(copies):
        t = table
        for name in shifted:  # each copy follows the last in time (and in id), so the run just looks longer
            i = t.schema.get_field_index(name)
            step = k * n if name == "id" else k * span
            t = t.set_column(i, t.schema.field(i), pc.add(t[name], pa.scalar(step, t.schema.field(i).type)))
        parts.append(t)
    big_table = pa.concat_tables(parts).slice(0, rows)
    big, small = work / "big", work / "small"
    shutil.copytree(run_dir, big)
    shutil.copytree(run_dir, small)
    as_parts(big_table, big, rows_per_part)
    as_parts(table, small, rows_per_part)
    del parts, big_table, table
    small_peak, big_peak = summarize_peak(small), summarize_peak(big)
    return {"rows_small": n, "rows_big": rows, "peak_small_mb": small_peak / 2**20, "peak_big_mb": big_peak / 2**20,
            "bytes_per_record": (big_peak - small_peak) / (rows - n)}  # fmt: skip


def run_figures(rate: float, seconds: float, keep: Path | None = None) -> dict:
    """RSS slope of a real run after warm-up, per recorded request."""
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            samples.append((time.perf_counter(), rss()))

    with tempfile.TemporaryDirectory() as tmp, scripted_server() as url:
        overrides = {
            "target.url": ("", url), "target.model": ("", "ok"), "load.rate": ("", rate),
            "load.arrival": ("", "constant"), "load.duration": ("", seconds), "load.warmup": ("", 2.0),
            "load.max_in_flight": ("", 5000), "workload.prompt_tokens": ("", 64), "workload.output_tokens": ("", 16),
            "validity.allow_drops": ("", True),
        }  # fmt: skip
        scenario = load_scenario(None, overrides)
        thread = threading.Thread(target=sample, daemon=True)
        start = time.perf_counter()
        thread.start()
        result = run_async(run_scenario(scenario, Path(tmp) / "run"))
        done.set()
        thread.join(2)
        records = pq.read_metadata(Path(tmp) / "run" / "records.parquet")
        parquet_bytes = (Path(tmp) / "run" / "records.parquet").stat().st_size
        if keep is not None:
            shutil.copytree(Path(tmp) / "run", keep)
    s = result.summary
    achieved = s["throughput"]["requests_per_s"]
    # the steady part: from 30 % to 90 % of the sending time (imports, pools and warm-up before it)
    lo, hi = start + 0.3 * seconds, start + 0.9 * seconds
    steady = [(t, r) for t, r in samples if lo <= t <= hi]
    n = len(steady)
    mean_t = sum(t for t, _ in steady) / n
    mean_r = sum(r for _, r in steady) / n
    slope = sum((t - mean_t) * (r - mean_r) for t, r in steady) / sum((t - mean_t) ** 2 for t, _ in steady)
    return {
        "rate": rate, "achieved": achieved, "rows": records.num_rows, "slope_bytes_per_s": slope,
        "bytes_per_record": slope / achieved if achieved else float("nan"), "parquet": parquet_bytes / records.num_rows,
        "rss_start_mb": steady[0][1] / 2**20, "rss_end_mb": steady[-1][1] / 2**20,
        "rss_peak_mb": max(r for _, r in samples) / 2**20,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="rows put in the RecordBuffer")
    parser.add_argument("--rate", type=float, default=500.0, help="request rate of the real run")
    parser.add_argument("--seconds", type=float, default=40.0, help="duration of the real run")
    parser.add_argument("--summary-rows", type=int, default=1_000_000, help="rows summarised for the end-of-run figure")
    args = parser.parse_args()
    b = buffer_figures(args.records)
    print(f"RecordBuffer, {b['records']:,} rows of 16 tokens:")
    print(
        f"  buffered (RSS growth)      {b['buffer_rss']:8.1f} bytes/record  ({b['buffer_rss'] * 1e6 / 2**20:8.1f} MiB per million)"
    )
    print(
        f"  Arrow table from take()    {b['arrow']:8.1f} bytes/record  ({b['arrow'] * 1e6 / 2**20:8.1f} MiB per million)"
    )
    print(
        f"  records.parquet (zstd)     {b['parquet']:8.1f} bytes/record  ({b['parquet'] * 1e6 / 2**20:8.1f} MiB per million)"
    )
    work = Path(tempfile.mkdtemp(prefix="surgelab-mem-"))
    try:
        r = run_figures(args.rate, args.seconds, keep=work / "run")
        e = summary_figures(work / "run", args.summary_rows, work, rows_per_part=max(1, round(args.rate)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"real run, {r['rate']:g} req/s offered for {args.seconds:g} s ({r['achieved']:.0f} req/s achieved, {r['rows']:,} rows):"
    )
    print(
        f"  RSS {r['rss_start_mb']:.1f} -> {r['rss_end_mb']:.1f} MiB over the steady part (peak {r['rss_peak_mb']:.1f} MiB)"
    )
    print(
        f"  RSS growth                 {r['bytes_per_record']:8.1f} bytes/record  ({r['bytes_per_record'] * 1e6 / 2**20:8.1f} MiB per million)"
    )
    print(f"  records.parquet            {r['parquet']:8.1f} bytes/record")
    print(
        f"end of a run (`surgelab summarize`: merge, summary, report), {e['rows_big']:,} vs {e['rows_small']:,} rows:"
    )
    print(f"  peak RSS {e['peak_big_mb']:.0f} MiB vs {e['peak_small_mb']:.0f} MiB")
    print(
        f"  peak RSS per record        {e['bytes_per_record']:8.1f} bytes/record  ({e['bytes_per_record'] * 1e6 / 2**20:8.1f} MiB per million)"
    )
    print()
    print(f"ratio to the 200 bytes/record target: during a run {r['bytes_per_record'] / 200:.2f}, end-of-run peak "
          f"{e['bytes_per_record'] / 200:.2f}, buffered rows {b['buffer_rss'] / 200:.2f}, parquet {b['parquet'] / 200:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
