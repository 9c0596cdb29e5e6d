"""Write errors (issue 20): an unwritable directory or a full disk is one line naming the file and what
to do — never a traceback —, the records already written are kept, and no ``.tmp`` is left behind.

A full disk is made without root: the file-size limit (``RLIMIT_FSIZE``) of the process doing the
writing is dropped to one byte, so every later write fails in the kernel, on the real write path
(pyarrow's, Python's), as it does when the disk fills. Python ignores SIGXFSZ, so the write
fails with EFBIG instead of killing the process. An unwritable directory is a read-only one, or
for root (who writes anywhere) sysfs, which creates no files for anybody.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.metrics.store import PARTS_DIR, read_records
from surgelab.report.outputs import finalize_run


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    place = Path("/sys") if os.geteuid() == 0 else tmp_path / "read-only"
    if place != Path("/sys"):
        place.mkdir()
        place.chmod(0o555)
    try:
        (place / "probe").write_text("x")
    except OSError:
        pass
    else:
        (place / "probe").unlink()
        pytest.skip(f"{place} is writable here")
    yield place
    if place != Path("/sys"):
        place.chmod(0o755)


@contextlib.contextmanager
def full_disk(limit: int = 1) -> Iterator[None]:
    """This process's writes beyond ``limit`` bytes of a file fail, as on a full disk, until the block ends."""
    saved = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, saved[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, saved)


def _cli(*args: str) -> SimpleNamespace:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def _one_error_line(stderr: str, *needles: str) -> str:
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    assert ".tmp" not in errors[0], "the file asked for is named, not its temporary"
    return errors[0]


def _no_tmp(*dirs: Path) -> None:
    for d in dirs:
        assert not [p for p in d.rglob("*") if p.name.endswith(".tmp")], sorted(d.rglob("*"))


@pytest.fixture(scope="module")
def finished_runs(zero_server, scenario_for, run, tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("written")
    run(scenario_for(zero_server.url, load={"rate": 20, "duration": "1s"}), base / "a")
    shutil.copytree(base / "a", base / "b")
    return base / "a", base / "b"


def test_a_full_disk_mid_run_keeps_the_parts_already_written(zero_server, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"target: {{url: '{zero_server.url}', model: ok}}\nload: {{rate: 20, duration: 6s}}\n"
        "workload: {prompt_tokens: 16, output_tokens: 4}\noutput: {flush_interval: 250ms}\n"
    )
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "surgelab", "run", str(scenario), "--out", str(run_dir), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(list((run_dir / PARTS_DIR).glob("part-*.parquet"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (1, 1))  # the disk is full from now on
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode not in (0, None), stderr
    line = _one_error_line(stderr, str(run_dir), "record part(s) already written are kept", "surgelab summarize")
    assert "File too large" in line
    _no_tmp(run_dir)
    kept = read_records(run_dir)
    assert kept.num_rows >= 2, "the parts written before the disk filled are still readable"
    assert sorted(kept["id"].to_pylist()) == list(range(kept.num_rows)), "whole parts, in order"
    # with room again, summarize rebuilds the summary from those parts
    rebuilt = _cli("summarize", str(run_dir))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads((run_dir / "summary.json").read_text())["requests"]["scheduled"] == kept.num_rows


def test_the_report_and_a_comparison_on_a_full_disk_leave_no_tmp(finished_runs, tmp_path):
    first, second = finished_runs
    summary = (first / "summary.json").read_bytes()
    out = Console(record=True, width=300, file=open(os.devnull, "w"))  # noqa: SIM115
    (tmp_path / "cmp").mkdir()
    with full_disk(64 * 1024):  # the page (several MB) cannot be written; nothing else is touched
        assert finalize_run(first, out) is None
        compared = _cli("compare", str(first), str(second), "--out", str(tmp_path / "cmp"), "--resamples", "100")
    warning = out.export_text()
    assert warning.count("warning:") == 1 and "report.html" in warning and "File too large" in warning, warning
    assert (first / "summary.json").read_bytes() == summary, "the summary stands"
    assert not (first / "report.html").exists()
    assert compared.returncode == 2
    _one_error_line(compared.stderr, str(tmp_path / "cmp" / "compare.html"), "File too large")
    _no_tmp(first, tmp_path)


def test_run_out_in_an_unwritable_directory_is_one_line(zero_server, unwritable, tmp_path, cli):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"target: {{url: '{zero_server.url}', model: ok}}\nload: {{rate: 5, duration: 1s}}\n")
    result = cli("run", str(scenario), "--out", str(unwritable / "run"), "--quiet")
    assert result.returncode == 2, result.stderr
    _one_error_line(result.stderr, "cannot create run directory", str(unwritable / "run"), "--out")


def test_plan_out_is_one_line_when_unwritable_and_never_overwrites_without_force(unwritable, tmp_path):
    plan = ("plan", "--capacity", "5", "--peak", "20")
    refused = _cli(*plan, "--out", str(unwritable / "plan"))
    assert refused.returncode == 2
    _one_error_line(refused.stderr, str(unwritable / "plan"), "--out")
    out = tmp_path / "plan"
    assert _cli(*plan, "--out", str(out)).returncode == 0
    first = json.loads((out / "plan.json").read_text())
    again = _cli("plan", "--capacity", "10", "--peak", "20", "--out", str(out))
    assert again.returncode == 2
    _one_error_line(again.stderr, str(out), "already holds a plan", "--force")
    assert json.loads((out / "plan.json").read_text()) == first, "the earlier plan is untouched"
    forced = _cli("plan", "--capacity", "10", "--peak", "20", "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "plan.json").read_text()) != first
    _no_tmp(out)


def test_compare_in_an_unwritable_directory_is_one_line(finished_runs, unwritable, monkeypatch):
    monkeypatch.chdir(unwritable)
    result = _cli("compare", *(str(r) for r in finished_runs), "--resamples", "100")
    assert result.returncode == 2
    _one_error_line(result.stderr, "compare.html", "--out")
