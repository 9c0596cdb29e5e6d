"""Every figure the docs quote from an offline command is what that command gives today.

A ```bash block in docs/*.md or README.md opts in with an HTML comment just before it (unseen
when the page is rendered), whose body is YAML:

    <!-- doc-check
    figures:                          # output files (relative to where the commands ran, globs allowed):
                                      # JSON, or Parquet as column.max/min/sum/count
      runs/deploy/qwen-h100/summary.json:
        fleet.sla_violations: 0       # a dotted key (list items by index): the figure as the doc quotes it
        latency_ms.e2e.p99: 1.69 s
    output: true                      # the next ``` block is the commands' output, line for line
    vary: ['in \\d+\\.\\d s']         # regular expressions masked on both sides (wall times)
    columns: 100                      # the terminal's width (COLUMNS) the output was printed at
    commands: [2]                     # only these of the block's commands (1-based); default all
    slow: 5 min of CPU                # skipped unless SURGELAB_DOC_CHECK=all
    continues: true                   # runs where the check before it in the doc ran, after it
    shell: true                       # the whole block in bash (files written with cat <<EOF, echo >)
    -->

The test runs the block's commands in a scratch directory that sees the repository's
``examples/`` (``surgelab …`` in this process, ``python …`` as a subprocess), then checks that each
figure is the output's value *rounded as quoted* (half a unit of the last digit quoted: counts are
exact; ``22.2 s`` against a key in ms is 22,150–22,250 ms; ``90.4 %`` against a fraction is
0.9035–0.9045; words, such as a stop reason, exactly) and that the quoted figure (its number as
written, or its words) is in the doc around the block (from the heading or check before it to the next).
A block of offline commands whose figures are not checked says why: ``<!-- doc-check: skip — … -->``.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

ROOT = Path(__file__).parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
MARKER = re.compile(r"<!-- doc-check(.*?)-->", re.S)
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
# surgelab commands that need no server, network or GPU: the ones a doc block must opt in or out for
OFFLINE = {"simulate", "plan", "memory", "little", "preview", "validate", "summarize", "fit"}
SLOW_ENV = "SURGELAB_DOC_CHECK"


@dataclass
class Check:
    """One marker: where it is, what it asks, the commands of its block and the doc text they govern."""

    doc: Path
    line: int
    spec: dict[str, Any]
    commands: list[str]
    section: str
    output: str | None = None  # the fenced block after the commands, when the spec asks for it
    skip: str | None = None
    after: Check | None = None  # with ``continues: true``, the check whose directory this one goes on in

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    def chain(self) -> list[Check]:
        """The checks whose commands run before this one's, first first, and this one."""
        return ([] if self.after is None else self.after.chain()) + [self]


@dataclass
class Block:
    start: int  # line index of the opening fence
    end: int  # line index of the closing fence
    lang: str
    body: str


def _blocks(lines: list[str]) -> list[Block]:
    """Fenced blocks, in order."""
    found, open_at, lang = [], None, ""
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if not m:
            continue
        if open_at is None:
            open_at, lang = i, m[2]
        else:
            found.append(Block(open_at, i, lang, "\n".join(lines[open_at + 1 : i])))
            open_at = None
    return found


def split_commands(body: str) -> list[str]:
    """The block's commands: lines joined across ``\\`` and across an open quote; comments and blanks dropped."""
    commands, pending, glue = [], "", "\n"
    for line in body.splitlines():
        pending = f"{pending}{glue}{line}" if pending else line
        glue = " " if pending.endswith("\\") else "\n"
        if glue == " ":
            pending = pending[:-1].rstrip()
            continue
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        if words:
            commands.append(pending)
        pending = ""
    return commands


def _program(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``VAR=value`` assignments apart from the command."""
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return env, words


def is_offline(command: str) -> bool:
    _, words = _program(shlex.split(command, comments=True))
    if words[:1] != ["surgelab"] or len(words) < 2:
        return False
    return words[1] in OFFLINE or (words[1] == "sweep" and "--fleet" in words)


def find_checks(doc: Path) -> tuple[list[Check], list[str]]:
    """The doc's markers, and the blocks of offline commands that have none."""
    lines = doc.read_text(encoding="utf-8").split("\n")
    text = "\n".join(lines)
    blocks = _blocks(lines)
    markers = {text[: m.start()].count("\n"): m for m in MARKER.finditer(text)}
    marker_ends = {text[: m.end()].count("\n"): start for start, m in markers.items()}
    inside = {i for b in blocks for i in range(b.start, b.end + 1)}
    headings = [i for i, line in enumerate(lines) if line.startswith("#") and i not in inside]
    checks, bare = [], []
    for k, block in enumerate(blocks):
        if block.lang != "bash":
            continue
        above = block.start - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        commands = split_commands(block.body)
        if above not in marker_ends:
            if any(is_offline(c) for c in commands):
                bare.append(f"{doc.relative_to(ROOT)}:{block.start + 1}")
            continue
        start = marker_ends[above]
        body = markers[start][1]
        if body.lstrip().startswith(":"):
            skip = body.lstrip()[1:].strip()
            assert re.match(r"skip\b", skip), f"{doc.name}:{start + 1}: a one-line marker is 'doc-check: skip — why'"
            checks.append(Check(doc, start + 1, {}, commands, "", skip=skip))
            continue
        spec = yaml.load(body, Loader=yaml.BaseLoader) or {}  # every scalar a string, as the doc writes it
        stop = min([h for h in headings if h > block.end] + [m for m in markers if m > block.end] + [len(lines)])
        begin = max([h for h in headings if h < start] + [e for e in marker_ends if e < start] + [0])
        section = MARKER.sub("", "\n".join(lines[begin:stop]))  # the prose around the block, less the markers
        output = None
        if spec.get("output") == "true":
            after = [b for b in blocks[k + 1 :] if b.start < stop and b.lang in ("", "text")]
            assert after, f"{doc.name}:{start + 1}: output: true, but no ``` block follows before the next heading"
            output = after[0].body
        picked = [int(n) for n in spec.get("commands", [])]
        if picked:
            commands = [commands[n - 1] for n in picked]
        if spec.get("shell") == "true":
            commands = [block.body]
        runnable = [c for c in checks if c.skip is None]
        after = runnable[-1] if spec.get("continues") == "true" and runnable else None
        checks.append(Check(doc, start + 1, spec, commands, section, output, after=after))
    return checks, bare


ALL = [(c, b) for doc in DOCS for c, b in [find_checks(doc)]]
CHECKS = [c for found, _ in ALL for c in found if c.skip is None]


# --- figures -----------------------------------------------------------------------------------------------

QUOTED = re.compile(r"^\s*(?P<number>[-+−]?[\d,]*\.?\d+)\s*(?P<unit>ms|s|%|GB)?\s*$")
TIME = {"ms": 1e-3, "s": 1.0}


def _key_unit(key: str) -> str | None:
    for part in key.split("."):
        for suffix, unit in (("_ms", "ms"), ("_s", "s"), ("_gb", "GB")):
            if part.endswith(suffix):
                return unit
    return None


def lookup(data: Any, key: str) -> Any:
    for part in key.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


AGGREGATES = {"max": max, "min": min, "sum": sum, "count": len}


def read_output(path: Path) -> Any:
    """A JSON file as it is; a Parquet file as ``{column: {max, min, sum, count}}`` of its non-null values."""
    if path.suffix != ".parquet":
        return json.loads(path.read_text(encoding="utf-8"))
    columns = pq.read_table(path).to_pydict()
    return {
        name: {agg: f([v for v in values if v is not None]) for agg, f in AGGREGATES.items()}
        for name, values in columns.items()
        if values and isinstance(next((v for v in values if v is not None), None), int | float)
    }


def quoted_matches(quoted: str, value: float, key: str) -> tuple[bool, float]:
    """Whether ``value`` (the output's, in the key's unit) rounds to ``quoted``; also the value in the quote's unit."""
    m = QUOTED.match(quoted)
    if not m:
        raise ValueError(f"{quoted!r} is not a number with an optional unit (ms, s, %, GB)")
    number = m["number"].replace(",", "").replace("−", "-")
    unit, have = m["unit"], _key_unit(key)
    if unit == "%" and have is None:
        value *= 100.0
    elif unit in TIME and have in TIME:
        value *= TIME[have] / TIME[unit]
    elif unit != have and unit is not None:
        raise ValueError(f"{key} is in {have or 'no unit'}, the doc quotes {unit}")
    decimals = len(number.split(".", 1)[1]) if "." in number else 0
    half = 0.5 * 10.0**-decimals
    return abs(value - float(number)) <= half * (1 + 1e-9), value


def _figure_problems(check: Check, cwd: Path) -> list[str]:
    problems = []
    for pattern, keys in check.spec.get("figures", {}).items():
        paths = sorted(glob.glob(str(cwd / pattern)))
        if len(paths) != 1:
            problems.append(f"{pattern}: {len(paths)} files match, not one")
            continue
        data = read_output(Path(paths[0]))
        for key, quoted in keys.items():
            number = QUOTED.match(quoted)
            if (number["number"] if number else quoted) not in check.section:  # "34.1 / 67 ms" quotes 34.1 ms
                problems.append(f"{pattern} {key}: {quoted!r} is not in the doc around the block")
            try:
                value = lookup(data, key)
            except (KeyError, IndexError, TypeError):
                problems.append(f"{pattern} {key}: no such key")
                continue
            if not QUOTED.match(quoted):  # words (a stop reason): as they are
                if str(value) != quoted:
                    problems.append(f"{pattern} {key}: the doc says {quoted!r}, the command gives {value!r}")
                continue
            ok, seen = quoted_matches(quoted, float(value), key)
            if not ok:
                problems.append(f"{pattern} {key}: the doc says {quoted}, the command gives {seen:,.4g} ({value})")
    return problems


# --- output ------------------------------------------------------------------------------------------------


def normalise(text: str, vary: list[str]) -> str:
    """One line of words: runs of spaces, and of box-drawing rules (whose length is the terminal's), fold to one."""
    for pattern in vary:
        text = re.sub(pattern, "<varies>", text)
    text = re.sub(r"[━─═]+", "─", text)
    return re.sub(r"\s+", " ", text).strip()


def _output_problems(check: Check, printed: str) -> list[str]:
    vary = check.spec.get("vary", [])
    printed = normalise(printed, vary)
    missing = []
    for line in check.output.splitlines():
        parts = [normalise(p, vary) for p in re.split(r"\.\.\.|…", line)]  # an ellipsis leaves part of a line out
        if any(p and p not in printed for p in parts):
            missing.append(line.strip())
    return [f"not in the output: {line!r}" for line in missing]


# --- running -----------------------------------------------------------------------------------------------


def _subprocess(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src"), "PY": sys.executable}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def run_commands(check: Check, cwd: Path) -> str:
    """Run the block's commands in ``cwd``; their output, stdout and stderr, in order."""
    from typer.testing import CliRunner

    from surgelab.cli import app

    columns = check.spec.get("columns", "100")
    if check.spec.get("shell") == "true":
        script = 'set -e\nsurgelab() { "$PY" -m surgelab "$@"; }\n' + "\n".join(check.commands)
        status, out = _subprocess(["bash", "-c", script], cwd, {"COLUMNS": columns})
        assert status == int(check.spec.get("exit", "0")), f"{check.id}: exit {status}\n{out}"
        return out
    printed = []
    for command in check.commands:
        env, words = _program(shlex.split(command, comments=True))
        env = {"COLUMNS": columns, **env}
        if words[0] == "surgelab":
            result = CliRunner().invoke(app, words[1:], env=env)
            status, out = result.exit_code, result.output
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                raise result.exception
        elif words[0] == "python":
            status, out = _subprocess([sys.executable, *words[1:]], cwd, env)
        else:
            raise AssertionError(f"{check.id}: only surgelab and python commands run here: {command}")
        assert status == int(check.spec.get("exit", "0")), f"{check.id}: {command}\nexit {status}\n{out}"
        printed.append(out)
    return "\n".join(printed)


def test_every_block_of_offline_commands_is_checked_or_says_why_not() -> None:
    bare = [b for _, found in ALL for b in found]
    assert not bare, "add <!-- doc-check … --> (or '<!-- doc-check: skip — why -->') before: " + ", ".join(bare)


SCRATCH: dict[str, tuple[Path, set[str]]] = {}  # per chain of continued checks: its directory, the checks run there


PARAMS = [pytest.param(c, id=c.id, marks=[pytest.mark.timeout(1800)] if any("slow" in k.spec for k in c.chain()) else [])
          for c in CHECKS]  # fmt: skip


@pytest.mark.parametrize("check", PARAMS)
def test_the_docs_figures_are_what_their_commands_give(
    check: Check, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = check.chain()
    slow = [c.spec["slow"] for c in chain if "slow" in c.spec]
    if slow and os.environ.get(SLOW_ENV) != "all":
        pytest.skip(f"slow ({'; '.join(slow)}): {SLOW_ENV}=all runs it")
    cwd, done = SCRATCH.get(chain[0].id, (None, set()))
    if cwd is None or any(c.id not in done for c in chain[:-1]):  # run alone: the earlier blocks first
        cwd, done = tmp_path_factory.mktemp("doc"), set()
        (cwd / "examples").symlink_to(ROOT / "examples")
        monkeypatch.chdir(cwd)
        for earlier in chain[:-1]:
            run_commands(earlier, cwd)
            done.add(earlier.id)
    monkeypatch.chdir(cwd)
    printed = run_commands(check, cwd)
    SCRATCH[chain[0].id] = (cwd, done | {check.id})
    problems = _figure_problems(check, cwd)
    if check.output is not None:
        problems += _output_problems(check, printed)
    assert not problems, f"{check.id}:\n  " + "\n  ".join(problems)


@dataclass
class _Case:
    quoted: str
    value: float
    key: str
    holds: bool = field(default=True)


@pytest.mark.parametrize(
    "case",
    [
        _Case("4,563", 4563, "fleet.sla_violations"),
        _Case("4,910", 4563, "fleet.sla_violations", False),
        _Case("22.2 s", 22152.9, "latency_ms.ttft.p99"),
        _Case("33.2 s", 22152.9, "latency_ms.ttft.p99", False),
        _Case("90.4 %", 0.90385, "goodput.fraction"),
        _Case("0.904", 0.90385, "goodput.fraction"),
        _Case("0.905", 0.90385, "goodput.fraction", False),
        _Case("1.30 s", 1295.4, "latency_ms.e2e.p99"),
        _Case("1,295", 1295.4, "latency_ms.e2e.p99"),
        _Case("1,296", 1295.4, "latency_ms.e2e.p99", False),
    ],
    ids=lambda c: f"{c.quoted}-{c.holds}",
)
def test_a_figure_holds_when_the_value_rounds_to_it(case: _Case) -> None:
    assert quoted_matches(case.quoted, case.value, case.key)[0] is case.holds


def test_commands_join_continued_lines_and_open_quotes() -> None:
    body = 'surgelab plan --capacity 100 \\\n    --peak 1000   # the seeds\' example\n\npython -c "\nprint(1)\n"'
    assert split_commands(body) == [
        "surgelab plan --capacity 100     --peak 1000   # the seeds' example",
        'python -c "\nprint(1)\n"',
    ]
