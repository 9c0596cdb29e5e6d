"""The package's shape, read from its own imports: every arrow one way, public boundaries, small modules.

A package is a folder under ``src/surgelab`` (or a top-level module). These tests fail on a
cycle between packages (function-local imports included: hiding an arrow in a function does
not remove it), on an import that goes up the layers of docs/architecture.md (or a package its
table does not place), on a private name taken from another package, on a module over 600 lines,
on a cycle between modules, and on a function-local import of surgelab's own code outside
``cli/`` (the command line imports lazily so ``surgelab --help`` stays fast) or of a
third-party module without a comment saying why it is deferred.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "surgelab"
LAYERS_DOC = SRC.parents[1] / "docs" / "architecture.md"
MAX_LINES = 600


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    names: tuple[str, ...]
    line: int
    local: bool  # inside a function
    commented: bool  # a comment on its line or the line above


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> list[Import]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    module = _module_name(path)
    found: list[Import] = []

    def commented(line: int) -> bool:
        return "#" in lines[line - 1] or (line > 1 and lines[line - 2].strip().startswith("#"))

    def visit(node: ast.AST, local: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only: no arrow at run time
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, alias.name, (), child.lineno, local, commented(child.lineno)))
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolve against this module's package
                    base = module.split(".")
                    base = base[: len(base) - child.level + (1 if path.name == "__init__.py" else 0)]
                    target = ".".join([*base, child.module] if child.module else base)
                else:
                    target = child.module or ""
                names = tuple(a.name for a in child.names)
                found.append(Import(module, target, names, child.lineno, local, commented(child.lineno)))
            visit(child, inner, type_only)

    visit(tree, False, False)
    return found


def _all_imports() -> dict[Path, list[Import]]:
    return {path: _imports(path) for path in sorted(SRC.rglob("*.py"))}


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def _package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> where (file:line), over every import of surgelab's own code."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, imports in _all_imports().items():
        for imp in imports:
            if not imp.target.startswith("surgelab"):
                continue
            targets = [imp.target]
            if imp.names and not _is_module(imp.target):
                targets = [imp.target]
            elif imp.names:  # `from surgelab.x import y` where y may be a module of x
                targets = [f"{imp.target}.{n}" if _is_module(f"{imp.target}.{n}") else imp.target for n in imp.names]
            for target in targets:
                src, dst = _package(imp.module), _package(target)
                if src and dst and src != dst:
                    graph[src][dst].append(f"{path.relative_to(SRC)}:{imp.line}")
    return graph


def _cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def connect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in list(graph):
        if node not in index:
            connect(node)
    return components


def test_no_cycle_between_packages():
    graph = _package_graph()
    problems = []
    for component in _cycles(graph):
        arrows = [f"  {a} -> {b}: {', '.join(graph[a][b][:3])}" for a in component for b in component if b in graph[a]]
        problems.append(f"cycle {' / '.join(component)}:\n" + "\n".join(arrows))
    assert not problems, "\n".join(problems)


def _layers(doc: str) -> dict[str, tuple[int, str]]:
    """package -> (its row, from the bottom; the row's label), read from the level table of ``doc``."""
    table = doc.split("| level | packages |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|") for line in table.splitlines()[2:] if line.startswith("|")]
    cells = [(i, row[1].strip(), re.findall(r"`([^`]+)`", row[2])) for i, row in enumerate(rows)]
    return {name.rstrip("/"): (i, label) for i, label, names in cells for name in names}


def _upward(imports: dict[Path, list[Import]], layers: dict[str, tuple[int, str]]) -> list[str]:
    """Every import of a package from a higher level (peers of one level may use each other: the cycle test orders them)."""
    problems = []
    for path, found in imports.items():
        for imp in found:
            src, dst = _package(imp.module), _package(imp.target)
            if not imp.target.startswith("surgelab") or not src or not dst or src == dst:
                continue
            if layers[dst][0] > layers[src][0]:
                problems.append(f"{path.relative_to(SRC)}:{imp.line}: {imp.module} imports {imp.target} — "
                                f"{src} is at level {layers[src][1]}, {dst} above it at {layers[dst][1]}")  # fmt: skip
    return problems


def test_imports_only_go_down_the_layers():
    """The order docs/architecture.md gives is the one the code has: no import reaches a higher level."""
    layers = _layers(LAYERS_DOC.read_text(encoding="utf-8"))
    imports = _all_imports()
    packages = {_package(_module_name(path)) for path in imports} - {""}
    unplaced = sorted(packages - set(layers))
    assert not unplaced, f"place these in the level table of docs/architecture.md: {', '.join(unplaced)}"
    problems = _upward(imports, layers)
    assert not problems, "imports that go up the layers:\n" + "\n".join(problems)


def test_the_layer_check_finds_an_upward_import():
    doc = "| level | packages | what |\n|---|---|---|\n| base | `units` | x |\n| 2 | `scenario/` | y |\n\nprose"
    layers = _layers(doc)
    assert layers == {"units": (0, "base"), "scenario": (1, "2")}
    down = Import("surgelab.scenario.load", "surgelab.units", ("parse_duration",), 3, False, False)
    up = Import("surgelab.units", "surgelab.scenario.model", ("Scenario",), 7, True, False)
    assert _upward({SRC / "scenario/load.py": [down]}, layers) == []
    assert _upward({SRC / "units.py": [up]}, layers) == [
        "units.py:7: surgelab.units imports surgelab.scenario.model — units is at level base, scenario above it at 2"
    ]


def test_no_cycle_between_modules():
    """Inside a package too: a cycle of modules is one concept split in two, or a type in the wrong room."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, imports in _all_imports().items():
        for imp in imports:
            if not imp.target.startswith("surgelab"):
                continue
            for target in [f"{imp.target}.{n}" if _is_module(f"{imp.target}.{n}") else imp.target for n in imp.names or ("",)]:
                target = target.rstrip(".")
                if target != imp.module and not imp.module.startswith(target + "."):  # not a parent package's face
                    graph[imp.module][target].append(f"{path.relative_to(SRC)}:{imp.line}")
    cycles = [" / ".join(c) for c in _cycles(graph)]
    assert not cycles, "module cycles:\n" + "\n".join(cycles)


def test_no_private_name_crosses_a_package():
    problems = []
    for path, imports in _all_imports().items():
        for imp in imports:
            if not imp.target.startswith("surgelab") or _package(imp.target) == _package(imp.module):
                continue
            private = [n for n in imp.names if n.startswith("_") and n != "__version__"]
            private += [p for p in imp.target.split(".")[2:] if p.startswith("_")]  # a package's private module
            if private:
                problems.append(f"{path.relative_to(SRC)}:{imp.line} takes {', '.join(private)} from {imp.target}")
    assert not problems, "\n".join(problems)


def test_no_module_over_600_lines():
    long = [f"{p.relative_to(SRC)}: {n}" for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, "split these into modules of one concept each:\n" + "\n".join(long)


def test_function_local_imports_only_defer_what_is_heavy():
    problems = []
    for path, imports in _all_imports().items():
        in_cli = _package(_module_name(path)) == "cli"
        for imp in imports:
            if not imp.local:
                continue
            own = imp.target.startswith("surgelab")
            if own and not in_cli:
                problems.append(f"{path.relative_to(SRC)}:{imp.line} imports {imp.target} inside a function")
            elif not own and not imp.commented and not in_cli:
                problems.append(f"{path.relative_to(SRC)}:{imp.line} defers {imp.target} without saying why")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b": ["x"]}, "b": {"a": ["y"]}}, [["a", "b"]]),
    ({"a": {"b": ["x"]}, "b": {"c": ["y"]}}, []),
])  # fmt: skip
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert _cycles(graph) == expected
